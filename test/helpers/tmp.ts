/**
 * Temporary folders for tests. `tempDirs()`, called once at the top of a test file, returns a
 * maker whose every folder is removed after that file's last test, whatever the tests did:
 * a folder is registered the moment it exists, so no failing assertion can leak it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/** A maker of temporary folders (`mesh-…` under the temp directory), each removed after the calling file's tests. */
export function tempDirs(): (prefix: string) => string {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return (prefix) => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}
