/**
 * The statistics every paired benchmark here prints: the median of per-round ratios and the middle half of
 * them (the 25th to the 75th percentile, nearest rank), as issue 28's method asks. Absolute times on a shared
 * machine are not comparable between runs; ratios paired within one run are.
 */

/** The median of `xs` (the upper one for an even count). */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The first and third quartiles of `xs` (nearest rank). */
export function middleHalf(xs: readonly number[]): [number, number] {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return [at(0.25), at(0.75)];
}

/** `1.23× (middle half 1.10–1.31, 10 rounds)`. */
export function ratioLine(ratios: readonly number[], digits = 2): string {
  const [low, high] = middleHalf(ratios);
  return `${median(ratios).toFixed(digits)}× (middle half ${low.toFixed(digits)}–${high.toFixed(digits)}, ${ratios.length} rounds)`;
}

/**
 * Runs `a` and `b` for `rounds` rounds, alternating which goes first, after `warmup` unmeasured rounds;
 * returns each side's measurements in round order.
 */
export async function paired<M>(rounds: number, a: () => Promise<M>, b: () => Promise<M>, warmup = 1): Promise<{ a: M[]; b: M[] }> {
  for (let i = 0; i < warmup; i++) {
    await a();
    await b();
  }
  const as: M[] = [];
  const bs: M[] = [];
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      as.push(await a());
      bs.push(await b());
    } else {
      bs.push(await b());
      as.push(await a());
    }
  }
  return { a: as, b: bs };
}

/**
 * With `BENCH_PROFILE=path` set, runs `fn` `times` times under the V8 profiler and writes the profile of
 * those runs only to `path.<name>.cpuprofile` (to read with bench/profileTop.ts); without it, does nothing.
 */
export async function profiled(name: string, fn: () => Promise<unknown>, times = 5): Promise<void> {
  const path = process.env.BENCH_PROFILE;
  if (!path) return;
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  for (let i = 0; i < times; i++) await fn();
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(`${path}.${name}.cpuprofile`, JSON.stringify(profile));
  session.disconnect();
}
