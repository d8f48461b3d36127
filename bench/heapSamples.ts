// Role: what V8's sampling heap profiler answers (bench only), and a short name for each script it names.

/** A node of `HeapProfiler.stopSampling`'s profile. */
export interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

/** A short name for a script's URL: `node_modules/<package>/…`, `rxfeed:<path>` for rxfeed's builds and sources, `node:…`. */
export function fileOf(url: string): string {
  if (url === '') return '(native)';
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) return url.slice(modules);
  const own = /\/(?:dist|\.rxfeed-before[^/]*)\/esm\/(.*)$/.exec(url) ?? /\/(?:src|bench)\/(.*)$/.exec(url);
  return own ? `rxfeed:${own[1]}` : url;
}
