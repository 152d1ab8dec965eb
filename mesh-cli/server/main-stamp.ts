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
export function mainTipFromFiles(dir: string, now = Date.now()): { ref: string; oid: string | null } | null {
  try {
    if (!plainRefFiles(dir)) return null;
    const ref = /^ref: (refs\/heads\/[^\s]+)\s*$/.exec(readFileSync(join(dir, 'HEAD'), 'utf8'))?.[1];
    if (ref === undefined) return null;
    const oid = refInFiles(dir, ref, now);
    return oid === undefined ? null : { ref, oid };
  } catch {
    return null;
  }
}

const OID = /^[0-9a-f]{40}$|^[0-9a-f]{64}$/;

/** Each packed-refs file read whole (ref → id), kept while its stamp holds when it was read settled. */
const packedSeen = new Map<string, { stamp: string; refs: Map<string, string> }>();

/**
 * Every ref in the packed-refs file at `path` → its id (empty when there is none), when the file
 * is settled (older than SETTLE_MS; git replaces it by rename, as it does a ref file): read and
 * parsed once, kept while its stamp holds. Undefined while it is not settled.
 */
function settledPackedRefs(path: string, now: number): Map<string, string> | undefined {
  const file = stat(path);
  if (file === null) return new Map();
  const seen = packedSeen.get(path);
  if (seen && seen.stamp === file.stamp) return seen.refs;
  if (now - file.changedMs < SETTLE_MS) return undefined;
  const refs = new Map<string, string>();
  for (const line of readBytesIfAny(path).toString('latin1').split('\n')) {
    const space = line.indexOf(' ');
    if (space > 0 && line[0] !== '#' && line[0] !== '^') refs.set(line.slice(space + 1).replace(/\r$/, ''), line.slice(0, space));
  }
  packedSeen.set(path, { stamp: file.stamp, refs });
  return refs;
}

/**
 * The id `ref` has in the packed-refs file at `path`, null when absent. At 10,000 report branches
 * the file is ~0.7 MB, read at every poll: decoding it to text and splitting it into lines cost
 * ~7 ms a poll. A settled file is parsed once (settledPackedRefs); one that changed less than
 * SETTLE_MS ago is searched for `ref`'s line without being decoded.
 */
function packedRef(path: string, ref: string, now: number): string | null {
  const settled = settledPackedRefs(path, now);
  if (settled) return settled.get(ref) ?? null;
  return packedOid(readBytesIfAny(path), ref);
}

/**
 * The id of `ref` as its files say (its loose file, else packed-refs): null when it does not
 * exist, undefined when git must be asked (refs that are not plain files, a symref, a damaged file).
 */
export function refFromFiles(dir: string, ref: string, now = Date.now()): string | null | undefined {
  try {
    return plainRefFiles(dir) ? refInFiles(dir, ref, now) : undefined;
  } catch {
    return undefined;
  }
}

/** refFromFiles in a repository whose refs are plain files (a symref or a damaged file: undefined). */
function refInFiles(dir: string, ref: string, now: number): string | null | undefined {
  const loose = readIfAny(join(dir, ref));
  if (loose !== '') return OID.test(loose.trim()) ? loose.trim() : undefined;
  const oid = packedRef(join(dir, 'packed-refs'), ref, now);
  return oid === null || OID.test(oid) ? oid : undefined;
}

/** Every ref named in the repository's packed-refs when it is settled (undefined while it is not, or it cannot be read). */
export function packedRefNames(dir: string, now = Date.now()): Iterable<string> | undefined {
  try {
    return settledPackedRefs(join(dir, 'packed-refs'), now)?.keys();
  } catch {
    return undefined;
  }
}

/**
 * The id `ref` has in the bytes of a packed-refs file (`<oid> <ref>` lines; peeled `^…` lines
 * follow the ref they peel, and a branch names a commit, so its own line is the one), null when
 * absent. Found by searching for the line's end, never by decoding the whole file.
 */
export function packedOid(bytes: Buffer, ref: string): string | null {
  const needle = Buffer.from(` ${ref}`);
  for (let at = bytes.indexOf(needle); at >= 0; at = bytes.indexOf(needle, at + 1)) {
    const end = at + needle.length;
    if (end !== bytes.length && bytes[end] !== 10 && bytes[end] !== 13) continue;
    const start = bytes.lastIndexOf(10, at) + 1;
    return bytes.toString('latin1', start, at);
  }
  return null;
}

function readBytesIfAny(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
    throw e;
  }
}

/** Refs are files git replaces by rename: not the reftable backend, and not kept in another (common) git dir. */
function plainRefFiles(dir: string): boolean {
  if (existsSync(join(dir, 'reftable')) || existsSync(join(dir, 'commondir'))) return false;
  return !/^\s*refstorage\s*=/im.test(readFileSync(join(dir, 'config'), 'utf8'));
}

/** A file's stamp and when it last changed (ctime: moved by every write and rename, and cannot be set back); null when it does not exist. */
export function stat(path: string): { stamp: string; changedMs: number } | null {
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
