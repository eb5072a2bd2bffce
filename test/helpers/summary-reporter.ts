import type { Reporter, SerializedError, TestModule } from 'vitest/node';

/**
 * Ends the run with one plain `N passed, N failed, N skipped` line that any CI can read. A file that
 * failed before its tests ran (setup, import) and an unhandled error each count as one failure, so
 * the line never reads green when the run was not.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const mod of modules) {
      let failedHere = 0;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else skipped++;
      }
      if (failedHere === 0 && (mod.state() === 'failed' || mod.errors().length > 0)) failedHere = 1;
      failed += failedHere;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
