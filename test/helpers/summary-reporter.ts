/** Ends the run with one plain line, "N passed, N failed, N skipped", that any CI can read. */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const count = { passed: 0, failed: 0, skipped: 0 };
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') count.passed++;
        else if (state === 'failed') count.failed++;
        else count.skipped++;
      }
      if (m.state() === 'failed' && [...m.children.allTests()].length === 0) count.failed++;
    }
    process.stdout.write(`\nmesh tests: ${count.passed} passed, ${count.failed} failed, ${count.skipped} skipped\n`);
  }
}
