/**
 * A stamp of the files that hold main's tip in a bare repository, so that `mesh-cli serve` asks
 * git for the tip only when one of them changed: HEAD (which names the branch), the branch's
 * loose ref and packed-refs. A file is stamped by inode, size, mtime and ctime. git replaces a
 * ref file by renaming a lock file over it, so every update is a new inode; but ext4 hands the
 * inode it just freed to the next file, so two updates within one clock tick can bring back a
 * stamp already seen. Like git's "racy" index entries, a stamp is therefore not trusted while
 * one of its files changed less than SETTLE_MS ago. Anything but plain ref files (a detached
 * HEAD, the reftable backend, refs in a common dir, a branch that is itself a symref, a file
 * that cannot be read) gives no stamp, and git is asked every time.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Longer than any timestamp granularity of the filesystems git's files backend is used on (a second on the coarsest). */
export const SETTLE_MS = 2000;

/** The stamp of what HEAD^{commit} resolves from in the bare repository `dir`, or null when git must be asked. */
export function mainStamp(dir: string, now = Date.now()): string | null {
  try {
    if (!plainRefFiles(dir)) return null;
    const head = stat(join(dir, 'HEAD')); // before it is read: a HEAD replaced in between changes the next stamp
    const branch = /^ref: (refs\/heads\/\S+)\s*$/.exec(readFileSync(join(dir, 'HEAD'), 'utf8'))?.[1];
    // A branch that is itself a symref moves with its target, which this stamp does not cover.
    if (head === null || branch === undefined || readIfAny(join(dir, branch)).startsWith('ref:')) return null;
    const files = [head, stat(join(dir, branch)), stat(join(dir, 'packed-refs'))];
    if (files.some((f) => f !== null && now - f.changedMs < SETTLE_MS)) return null;
    return files.map((f) => f?.stamp ?? 'absent').join(' ');
  } catch {
    return null;
  }
}

/**
 * Main's tip read from the ref files themselves (its loose ref, else packed-refs), as git would
 * resolve it: `ref` is the branch HEAD names, `oid` null when it does not exist yet. Null when the
 * refs are not plain files (see above), and git must be asked.
 */
export function mainTipFromFiles(dir: string): { ref: string; oid: string | null } | null {
  try {
    if (!plainRefFiles(dir)) return null;
    const ref = /^ref: (refs\/heads\/[^\s]+)\s*$/.exec(readFileSync(join(dir, 'HEAD'), 'utf8'))?.[1];
    if (ref === undefined) return null;
    const loose = readIfAny(join(dir, ref));
    if (loose.startsWith('ref:')) return null;
    if (loose !== '') return OID.test(loose.trim()) ? { ref, oid: loose.trim() } : null;
    // Peeled lines (^…) follow the ref they peel; a branch names a commit, so its own line is the one.
    const packed = readIfAny(join(dir, 'packed-refs')).split('\n').find((line) => line.endsWith(` ${ref}`));
    const oid = packed?.slice(0, packed.indexOf(' ')) ?? null;
    return oid === null || OID.test(oid) ? { ref, oid } : null;
  } catch {
    return null;
  }
}

const OID = /^[0-9a-f]{40}$|^[0-9a-f]{64}$/;

/** Refs are files git replaces by rename: not the reftable backend, and not kept in another (common) git dir. */
function plainRefFiles(dir: string): boolean {
  if (existsSync(join(dir, 'reftable')) || existsSync(join(dir, 'commondir'))) return false;
  return !/^\s*refstorage\s*=/im.test(readFileSync(join(dir, 'config'), 'utf8'));
}

/** A file's stamp and when it last changed (ctime: moved by every write and rename, and cannot be set back); null when it does not exist. */
function stat(path: string): { stamp: string; changedMs: number } | null {
  try {
    const s = statSync(path, { bigint: true });
    return { stamp: `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`, changedMs: Number(s.ctimeMs) };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

function readIfAny(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw e;
  }
}
