/**
 * Formats rows as a plain text table: a header line, then one line per row, columns padded to their widest
 * cell. `-` stands for empty cells.
 */
export function table(header: readonly string[], rows: readonly (readonly (string | number | null | undefined)[])[]): string[] {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined || c === '' ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i]!))).join('  ').trimEnd());
}

/** A duration for people: `850 ms`, `12 s`, `4 min`, `3 h`, `2 d`. */
export function duration(ms: number | undefined): string {
  if (ms === undefined) return '-';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1_000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  if (ms < 172_800_000) return `${Math.round(ms / 3_600_000)} h`;
  return `${Math.round(ms / 86_400_000)} d`;
}
