/**
 * vitest globalSetup: the test run gets a temporary directory of its own (TMPDIR, which every
 * worker, built CLI and git process inherits), and fails when a test left a mesh-* folder in it.
 * A private directory makes the check exact even while other runs share the machine's /tmp.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const outer = tmpdir();
  const run = mkdtempSync(join(outer, 'mesh-run-'));
  const before = process.env.TMPDIR;
  process.env.TMPDIR = run;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    const left = readdirSync(run).filter((name) => name.startsWith('mesh-')).sort(); // the tests' own folders
    rmSync(run, { recursive: true, force: true });
    if (left.length > 0) {
      process.exitCode = 1;
      throw new Error(`the tests left ${left.length} temporary folder(s) behind (each test must remove what it makes; see test/helpers/tmp.ts): ${left.join(', ')}`);
    }
  };
}
