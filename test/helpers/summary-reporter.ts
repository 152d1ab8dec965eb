/**
 * Ends the run with one plain line, "N passed, N failed, N skipped", that any CI can read, after
 * the reason of every suite skipped for a reason of its own (`ctx.skip('SKIPPED …: why')`, once each).
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const count = { passed: 0, failed: 0, skipped: 0 };
    const reasons = new Set<string>();
    for (const m of modules) {
      let failedHere = 0;
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') count.passed++;
        else if (state === 'failed') failedHere++;
        else {
          count.skipped++;
          const result = t.result();
          if (result.state === 'skipped' && result.note?.startsWith('SKIPPED ')) reasons.add(result.note);
        }
      }
      // A file whose setup failed skips its tests: count the file itself as a failure.
      count.failed += m.state() === 'failed' && failedHere === 0 ? 1 : failedHere;
    }
    for (const reason of reasons) process.stdout.write(`\n${reason}`);
    process.stdout.write(`\nmesh tests: ${count.passed} passed, ${count.failed} failed, ${count.skipped} skipped\n`);
  }
}
