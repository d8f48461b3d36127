// The API report: one api/<entry>.api.md per entry point, written by API Extractor from the built
// declarations (dist/esm). `node scripts/api-report.mjs` fails when the public API differs from the committed
// report (run in `npm test`); `--update` rewrites the reports, to be committed with the change that caused them.
import { Extractor, ExtractorConfig, ExtractorLogLevel } from '@microsoft/api-extractor';
import { existsSync } from 'node:fs';
import ts from 'typescript';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const update = process.argv.includes('--update');

/** Entry point (package subpath) → its declaration file and report name. */
const entries = [
  ['rxfeed', 'index.d.ts'],
  ['rxfeed/postgres', 'postgres/index.d.ts'],
  ['rxfeed/metrics', 'metrics/index.d.ts'],
  ['rxfeed/leases', 'leases/index.d.ts'],
  ['rxfeed/emulator', 'emulator/index.d.ts'],
  ['rxfeed/sse', 'sse/index.d.ts'],
  ['rxfeed/sse/client', 'sse/client/index.d.ts'],
  ['rxfeed/redis', 'redis/index.d.ts'],
  ['rxfeed/nats', 'nats/index.d.ts'],
  ['rxfeed/amqp', 'amqp/index.d.ts'],
];

if (!existsSync(join(root, 'dist', 'esm', 'index.d.ts'))) {
  console.error('dist is missing: run `npm run build` first');
  process.exit(1);
}

/** Names the `rxfeed` entry point exports: a subpath may use them without exporting them again. */
const coreNames = new Set();
const forgotten = /The symbol "([^"]+)" needs to be exported/;

let failed = false;
for (const [entry, dts] of entries) {
  const reportName = entry.replaceAll('/', '-');
  const config = ExtractorConfig.prepare({
    configObjectFullPath: join(root, 'api', `${reportName}.json`),
    packageJsonFullPath: join(root, 'package.json'),
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: join(root, 'dist', 'esm', dts),
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            target: 'ES2022',
            lib: ['ES2022'],
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            types: ['node'],
            strict: true,
            skipLibCheck: true,
          },
          files: [join(root, 'dist', 'esm', dts)],
        },
      },
      apiReport: {
        enabled: true,
        reportFileName: `${reportName}.api.md`,
        reportFolder: join(root, 'api'),
        reportTempFolder: join(root, 'node_modules', '.cache', 'api-extractor'),
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: 'warning' } },
        extractorMessageReporting: {
          default: { logLevel: 'warning', addToApiReportFile: false },
          // Every entry point is public; release tags other than @internal are not used.
          'ae-missing-release-tag': { logLevel: 'none' },
          // A public declaration that uses a type the entry point does not export.
          'ae-forgotten-export': { logLevel: 'error', addToApiReportFile: false },
          'ae-internal-missing-underscore': { logLevel: 'none' },
          // Members that implement a documented interface member inherit its documentation (TypeDoc checks
          // that every export is documented: \`npm run docs\`).
          'ae-undocumented': { logLevel: 'none' },
          // Links are checked by TypeDoc, which also resolves links to overloaded functions.
          'ae-unresolved-link': { logLevel: 'none' },
        },
        tsdocMessageReporting: {
          default: { logLevel: 'warning', addToApiReportFile: false },
          // The sources use JSDoc's `@param name text`, which TypeDoc reads as well.
          'tsdoc-param-tag-missing-hyphen': { logLevel: 'none' },
          'tsdoc-param-tag-with-invalid-name': { logLevel: 'none' },
        },
      },
    },
  });
  const result = Extractor.invoke(config, {
    localBuild: update,
    showVerboseMessages: false,
    messageCallback: (message) => {
      const name = message.messageId === 'ae-forgotten-export' ? forgotten.exec(message.text)?.[1] : undefined;
      if (entry !== 'rxfeed' && name !== undefined && coreNames.has(name)) {
        message.handled = true;
        return;
      }
      const isProblem = message.logLevel === ExtractorLogLevel.Warning || message.logLevel === ExtractorLogLevel.Error;
      // console-* messages report what happened to the report file, judged below.
      if (isProblem && !String(message.messageId).startsWith('console-')) {
        failed = true;
      }
      if (message.logLevel === ExtractorLogLevel.Info || message.logLevel === ExtractorLogLevel.Verbose) {
        message.handled = true;
      }
    },
  });
  if (entry === 'rxfeed') for (const name of exportedNames(join(root, 'dist', 'esm', dts))) coreNames.add(name);
  // Every problem went through messageCallback; `succeeded` also counts the ones handled there.
  if (result.apiReportChanged && !update) failed = true;
  if (result.apiReportChanged && !update) {
    console.error(`api/${reportName}.api.md is out of date: the public API of ${entry} changed. Review it and run \`npm run api:update\`.`);
  }
}
/** The names an entry point's declarations export, read with the TypeScript checker. */
function exportedNames(file) {
  const program = ts.createProgram([file], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, skipLibCheck: true, noEmit: true });
  const checker = program.getTypeChecker();
  const symbol = checker.getSymbolAtLocation(program.getSourceFile(file));
  return symbol ? checker.getExportsOfModule(symbol).map((s) => s.name) : [];
}

if (failed) {
  console.error(update ? 'API report written with warnings or errors (see above).' : 'API report check failed (see above).');
  process.exit(1);
}
console.log(update ? 'API reports written to api/.' : 'API reports match the public API.');
