/**
 * Crash-safe writes: temporary file, fsync, rename, fsync of the directory (now, or once at the
 * end of the pass for resource writes). The temporary
 * file has a fixed name next to its target (one host per root, see lock.ts), so the next write
 * of that path clears what a crash left; it is created with O_EXCL, so it never follows a link.
 *
 * A pass's file resources are written in batches (WriteBatch) instead, so that a batch pays for
 * one sync rather than one per file: every file of the batch is written to its temporary name
 * (with its mode and owner already set), then the data of all of them is made durable at once,
 * then each is renamed into place. A crash leaves each target old or new, never torn, as before.
 * The batch remembers each file it put in place by its inode and by the size and modification
 * time it had right after the write (`written`), so that the read-back of a file still as this
 * pass left it compares what was written instead of reading the bytes again.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, fchmodSync, fchownSync, fstatSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeFileSync, writeSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { crashNow, type Faults } from './fault.js';

/**
 * Replace `path` with `data` so that a crash leaves either the old or the new file, never a torn
 * one. With `deferDirSync` (the pass's set of such folders), the rename is made durable later,
 * by syncDeferredDirs (once per directory), instead of now. `faults` is the crash test's
 * `mid-write` point.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644, opts: { deferDirSync?: Set<string>; faults?: Faults } = {}): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true });
  const tmp = tmpOf(path);
  const fd = openTmp(tmp, mode);
  try {
    writeData(fd, data, opts.faults);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  if (opts.deferDirSync) opts.deferDirSync.add(dir);
  else fsyncDir(dir);
}

/** The uid and gid a staged file gets, from what its temporary file has (`st`). */
export type Ownership = (st: Stats) => { uid: number; gid: number };

/** A file a batch wrote: its inode, its size and modification time right after the write, and its data. */
interface Landed {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  data: string | Uint8Array;
}

/** Below this many files, a batch fsyncs each file: cheaper than starting `sync -f`. */
const SYNCFS_FROM = 24;

/**
 * Files written to their temporary names and renamed into place together (see the header).
 * `stage` writes one; `commit` makes every staged file's data durable (one `sync -f` per
 * filesystem, Linux's syncfs, for a large batch; an fsync of each file for a small one or where
 * that fails) and then renames each into place, leaving the renames to syncDeferredDirs.
 */
export class WriteBatch {
  private staged: Array<{ tmp: string; path: string; dev: number; landed: Landed }> = [];
  /** The files this batch renamed into place, by path. */
  private landed = new Map<string, Landed>();

  get size(): number {
    return this.staged.length;
  }

  /** Write `data` to `path`'s temporary file, with `mode` and, when `own` is given, its owner; `path`'s folder must exist. */
  stage(path: string, data: string | Uint8Array, mode: number, own: Ownership | undefined, faults?: Faults): void {
    const tmp = tmpOf(path);
    const fd = openTmp(tmp, mode);
    try {
      writeData(fd, data, faults);
      const st = fstatSync(fd);
      if (own) {
        const { uid, gid } = own(st);
        if (uid !== st.uid || gid !== st.gid) fchownSync(fd, uid, gid);
      }
      fchmodSync(fd, mode); // after chown, which clears setuid bits; the umask narrowed the mode given to open()
      // fchown and fchmod change the inode's ctime, the rename its folder's: neither its size nor its mtime.
      this.staged.push({ tmp, path, dev: st.dev, landed: { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, data } });
    } catch (e) {
      unlinkQuietly(tmp);
      throw e;
    } finally {
      closeSync(fd);
    }
    if (faults?.due('staged')) crashNow();
  }

  /** Make the staged files durable, then rename each into place; each folder renamed into is added to `dirsToSync`. */
  commit(dirsToSync: Set<string>, faults?: Faults): void {
    const staged = this.staged;
    this.staged = [];
    if (staged.length === 0) return;
    try {
      syncData(staged);
    } catch (e) {
      for (const s of staged) unlinkQuietly(s.tmp);
      throw e;
    }
    for (const { tmp, path, landed } of staged) {
      try {
        renameSync(tmp, path);
        this.landed.set(path, landed);
        dirsToSync.add(dirname(path));
      } catch {
        unlinkQuietly(tmp); // the target's read-back tells
      }
      if (faults?.due('renamed')) crashNow();
    }
  }

  /**
   * The data this pass wrote to `path`, when `st` (an lstat of `path` now) shows the file there
   * to be the one it renamed into place, unchanged since: the same inode, with the size and the
   * modification time it had right after its data was written. Anything else (a file replaced,
   * rewritten, truncated, or never written by this pass) gives undefined, and must be read.
   */
  written(path: string, st: Stats): string | Uint8Array | undefined {
    const landed = this.landed.get(path);
    if (!landed || !st.isFile() || st.ino !== landed.ino || st.dev !== landed.dev || st.size !== landed.size || st.mtimeMs !== landed.mtimeMs) return undefined;
    return landed.data;
  }

  /** Remove every staged file (the batch will not be committed). */
  discard(): void {
    for (const s of this.staged) unlinkQuietly(s.tmp);
    this.staged = [];
  }
}

/** Make the data of `files` durable: syncfs on each filesystem they are on, or fsync of each. */
function syncData(files: Array<{ tmp: string; dev: number }>): void {
  if (files.length >= SYNCFS_FROM && process.platform === 'linux') {
    const onEach = [...new Map(files.map((f) => [f.dev, f.tmp])).values()];
    // Node has no binding for syncfs(2): coreutils' `sync -f` makes the call.
    const sync = spawnSync('sync', ['-f', ...onEach], { stdio: 'ignore' });
    if (sync.status === 0) return;
  }
  for (const { tmp } of files) {
    const fd = openSync(tmp, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
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

const tmpOf = (path: string) => join(dirname(path), `.${basename(path)}.mesh-tmp`);

/** Create `tmp` afresh (O_EXCL: never through a link); one a crash left behind is removed first. */
function openTmp(tmp: string, mode: number): number {
  try {
    return openSync(tmp, 'wx', mode);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  unlinkSync(tmp);
  return openSync(tmp, 'wx', mode);
}

/** Write all of `data`; at the crash test's `mid-write` point, half of it (made durable) and die. */
function writeData(fd: number, data: string | Uint8Array, faults: Faults | undefined): void {
  if (faults?.due('mid-write')) {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    writeSync(fd, bytes, 0, Math.floor(bytes.length / 2));
    fsyncSync(fd);
    crashNow();
  }
  writeFileSync(fd, data);
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}
