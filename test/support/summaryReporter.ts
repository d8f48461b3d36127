import type { Reporter } from 'vitest/reporters';

type Task = { type: string; mode?: string; result?: { state?: string }; tasks?: Task[] };

/**
 * Prints one plain closing line, `tests: N passed, N failed, N skipped`, after vitest's own summary, so
 * tools that read a run's last line (CI) need not parse vitest's format.
 */
export default class SummaryReporter implements Reporter {
  onFinished(files: Task[] = [], errors: unknown[] = []): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const visit = (task: Task): void => {
      if (task.tasks) task.tasks.forEach(visit);
      if (task.type !== 'test') return;
      const state = task.result?.state;
      if (state === 'pass') counts.passed++;
      else if (state === 'fail') counts.failed++;
      else counts.skipped++;
    };
    files.forEach(visit);
    // A file that failed to load has no tests; count it as a failure so the line never reads all-green.
    const brokenFiles = files.filter((f) => f.result?.state === 'fail' && !(f.tasks ?? []).length).length;
    const failed = counts.failed + brokenFiles + errors.length;
    console.log(`\ntests: ${counts.passed} passed, ${failed} failed, ${counts.skipped} skipped`);
  }
}
