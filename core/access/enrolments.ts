/**
 * The enrolment records of one repository: a folder `<node>.<generation>` per token used, made
 * with mkdir so that two enrolments at once cannot both win, holding the time of the first in
 * `at`. It lives outside the repository's refs and objects, where no push can reach it.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EnrolmentRecords } from './rules.js';

/** The records kept in the folder `dir` (made when missing); `now` stamps a first enrolment. */
export function enrolmentFolder(dir: string, now: () => Date = () => new Date()): EnrolmentRecords {
  return {
    async claim(node, generation) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const record = join(dir, `${node}.${generation}`);
      try {
        mkdirSync(record);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        let at: string | null = null;
        try {
          at = readFileSync(join(record, 'at'), 'utf8').trim() || null;
        } catch {
          // made, not yet stamped (or stamped by an older server): the time is unknown
        }
        return { first: false, at };
      }
      writeFileSync(join(record, 'at'), now().toISOString().replace(/\.\d{3}Z$/, 'Z') + '\n');
      return { first: true };
    },
  };
}
