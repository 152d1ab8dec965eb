/**
 * Temporary names for the files status keeps in `.git/mesh/` (the index, identities.json,
 * nodes.json, the report texts): each written whole under a name of its own, then renamed into
 * place. One name per process and write, so that two status runs in one checkout at once never
 * write into the same temporary file: each renames a whole file of its own, and the last one wins.
 * A run killed mid-write leaves its temporary file behind; the next write of that file removes
 * those older than STALE_MS (a live write takes seconds), and the `.tmp` of earlier versions.
 */
import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

const STALE_MS = 10 * 60_000;
let written = 0;

/** A temporary name beside `file` that no other write uses; temporary files of `file` left by killed runs are removed first. */
export function tempBeside(file: string): string {
  sweep(file);
  return `${file}.${process.pid}-${++written}.tmp`;
}

function sweep(file: string): void {
  const dir = dirname(file);
  const prefix = `${basename(file)}.`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return; // no folder yet: nothing left behind
  }
  for (const name of names) {
    const rest = name.startsWith(prefix) ? name.slice(prefix.length) : '';
    if (rest !== 'tmp' && !/^\d+-\d+\.tmp$/.test(rest)) continue;
    try {
      if (Date.now() - lstatSync(join(dir, name)).mtimeMs > STALE_MS || rest === 'tmp') rmSync(join(dir, name), { force: true });
    } catch {
      // gone already (another run's rename)
    }
  }
}
