/**
 * Crash-safe writes: temporary file, fsync, rename, fsync of the directory (now, or once at the
 * end of the pass for resource writes). The temporary
 * file has a fixed name next to its target (one host per root, see lock.ts), so the next write
 * of that path clears what a crash left; it is created with O_EXCL, so it never follows a link.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { crashNow, type Faults } from './fault.js';

/**
 * Replace `path` with `data` so that a crash leaves either the old or the new file, never a torn
 * one. With `deferDirSync` (the pass's set of such folders), the rename is made durable later,
 * by syncDeferredDirs (once per directory), instead of now: for resource writes, where a lost
 * rename is only drift that the next pass reads back and repairs (see file.ts). `faults` is
 * the crash test's `mid-write` point.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644, opts: { deferDirSync?: Set<string>; faults?: Faults } = {}): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.mesh-tmp`);
  try {
    unlinkSync(tmp);
  } catch {
    // none left behind
  }
  const fd = openSync(tmp, 'wx', mode);
  try {
    if (opts.faults?.due('mid-write')) {
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      writeSync(fd, bytes, 0, Math.floor(bytes.length / 2));
      fsyncSync(fd);
      crashNow();
    }
    writeFileSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  if (opts.deferDirSync) opts.deferDirSync.add(dir);
  else fsyncDir(dir);
}

/** Make every deferred rename in `deferred` durable: one fsync per directory, however many files changed in it. */
export function syncDeferredDirs(deferred: Set<string>): void {
  for (const dir of deferred) {
    try {
      fsyncDir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e; // removed since: nothing left to make durable
    }
  }
  deferred.clear();
}

/** Make a rename or unlink in `dir` durable. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
