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
import { closeSync, fchmodSync, fchownSync, fstatSync, fsync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync, writeSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
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

/** Below this many files, a batch fsyncs each file in turn: cheaper than starting `sync -f`. */
const SYNCFS_FROM = 24;

/**
 * syncfs writes every program's unwritten data on the filesystem and waits for all of it: with
 * 100 MB of another program's writes pending it took ~90 ms here instead of ~11 ms, and on a busy
 * server it would be seconds of I/O that mesh forced. So a large batch uses it only while the
 * machine's pending data (Dirty and Writeback in /proc/meminfo), less the batch's own, is at most
 * this; otherwise it fsyncs its own files, SYNCS_IN_FLIGHT at a time (the filesystem commits
 * concurrent fsyncs together: ~15 ms for 150 files, whatever else is pending).
 */
export const SYNCFS_MAX_FOREIGN = 16 * 1024 * 1024;
/** The fsyncs a large batch has in flight at once when it does not use syncfs (main.ts gives libuv's pool as many threads). */
export const SYNCS_IN_FLIGHT = 16;

/**
 * Files written to their temporary names and renamed into place together (see the header).
 * `stage` writes one; `commit` makes every staged file's data durable (syncData) and then renames
 * each into place, leaving the renames to syncDeferredDirs.
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
  async commit(dirsToSync: Set<string>, faults?: Faults): Promise<void> {
    const staged = this.staged;
    this.staged = [];
    if (staged.length === 0) return;
    try {
      await syncData(staged);
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

  /** The temporary file staged for `path` (its content, not in place yet), or undefined. */
  stagedAt(path: string): string | undefined {
    return this.staged.find((s) => s.path === path)?.tmp;
  }

  /** Remove the file staged for `path`: it will not be put in place. */
  unstage(path: string): void {
    const i = this.staged.findIndex((s) => s.path === path);
    if (i < 0) return;
    unlinkQuietly(this.staged[i]!.tmp);
    this.staged.splice(i, 1);
  }

  /** Remove every staged file (the batch will not be committed). */
  discard(): void {
    for (const s of this.staged) unlinkQuietly(s.tmp);
    this.staged = [];
  }
}

/**
 * Make the data of `files` durable: for a large batch, syncfs on each filesystem they are on when
 * little else is pending (SYNCFS_MAX_FOREIGN), else an fsync of each, together; for a small one,
 * an fsync of each in turn.
 */
async function syncData(files: Array<{ tmp: string; dev: number; landed: Landed }>): Promise<void> {
  if (files.length >= SYNCFS_FROM) {
    const own = files.reduce((sum, f) => sum + Math.ceil(f.landed.size / 4096) * 4096, 0);
    if (process.platform === 'linux' && syncfsFits(meminfo(), own)) {
      const onEach = [...new Map(files.map((f) => [f.dev, f.tmp])).values()];
      // Node has no binding for syncfs(2): coreutils' `sync -f` makes the call.
      const sync = spawnSync('sync', ['-f', ...onEach], { stdio: 'ignore' });
      if (sync.status === 0) return;
    }
    return fsyncTogether(files.map((f) => f.tmp));
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

/** Whether syncfs would wait for little more than `own` bytes, by /proc/meminfo's text (null: unreadable, so no). */
export function syncfsFits(meminfo: string | null, own: number): boolean {
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(meminfo ?? '')?.[1] ?? Number.NaN);
  const pending = (kb('Dirty') + kb('Writeback')) * 1024;
  return Number.isFinite(pending) && pending - own <= SYNCFS_MAX_FOREIGN;
}

function meminfo(): string | null {
  try {
    return readFileSync('/proc/meminfo', 'latin1');
  } catch {
    return null;
  }
}

const fsyncAsync = promisify(fsync);

/** fsync each of `paths`, SYNCS_IN_FLIGHT at a time. */
export async function fsyncTogether(paths: string[]): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < paths.length) {
      const fd = openSync(paths[next++]!, 'r');
      try {
        await fsyncAsync(fd);
      } finally {
        closeSync(fd);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(SYNCS_IN_FLIGHT, paths.length) }, lane));
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
