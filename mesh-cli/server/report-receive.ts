/**
 * A node's report push taken in-process. Through git, one push of a host's report cost 0.14–0.18 s
 * of server CPU at 10,000 report branches (docs/scale.md, session 12): http-backend, receive-pack,
 * the pre-receive hook's shell and its three git processes, the connectivity check,
 * unpack-objects and gc --auto, most of them reading every ref of the fleet. What a host pushes is
 * small and always of one shape (agent/fleet/push.ts): its report branch moved from the tip it
 * last pushed to a new commit, or to a heartbeat that replaces that tip; a commit, its tree,
 * status.json and its signature, as whole objects in one pack.
 *
 * That push is taken here only when git would take it as it is: this file never refuses. It
 * accepts a push that passes the pre-receive hook's checks (hooks.ts: no file over
 * MAX_REPORT_FILE; an enrolment goes to git, which records it once) and git's own: the pack reads
 * to its end and its checksum holds, every object the new tip names is in the pack, a parent
 * outside the pack is the branch's tip or that tip's parent (which the repository holds), and the
 * branch is at the old id the push names. Anything else (a refusal, an enrolment, a delta, a
 * parent it cannot place, a lock held, a repository set to log, share or check more than git's
 * defaults) is handed to git unchanged, which decides it as before.
 *
 * Writing follows git's files backend: the objects as loose objects (a temporary name, synced,
 * renamed into place, their folders synced), then the ref under git's own lock file
 * (`<ref>.lock`, created exclusively, so git and this server never update one ref at once), its
 * old id checked under the lock, the new one synced and renamed into place. Every GC_EVERY pushes
 * taken in a repository it runs `git gc --auto`, which receive-pack runs after every push.
 */
import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat as statFile, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { deflateSync, inflateSync, type Inflate } from 'node:zlib';
import { MAX_REPORT_FILE } from '../../core/access/rules.js';
import { parseCommitObject } from '../../core/git/commit.js';
import { wholeTreeEntries } from '../../core/git/tree.js';
import { reportRef, STATUS_FILE } from '../../core/report/branch.js';
import { gitBytes, spawnGit } from '../git.js';
import { packedRefNames, refFromFiles, stat } from './main-stamp.js';
import { acceptedResult, type PushCommands } from './push-commands.js';

/** The largest push body read into memory to be taken here; a larger one goes to git as a stream. */
export const MAX_RECEIVE_BODY = 4 * 1024 * 1024;
/** A host pushes a handful of objects; a push of more goes to git. */
const MAX_OBJECTS = 256;
const MAX_COMMITS = 64;
/** receive-pack runs `gc --auto` after every push; a push taken here adds four loose objects, so every 64th is plenty. */
const GC_EVERY = 64;
/** What a client may ask for in a push taken here; anything else (push options, a push certificate, atomic) goes to git. */
const CAPABILITY = /^(report-status|report-status-v2|side-band-64k|side-band|quiet|ofs-delta|agent=\S*|object-format=\S*|session-id=\S*)$/;
const TYPES = [undefined, 'commit', 'tree', 'blob'] as const;
type ObjectType = 'commit' | 'tree' | 'blob';
type Hash = 'sha1' | 'sha256';

interface PackObject {
  type: ObjectType;
  data: Buffer;
}

export interface ReportReceiver {
  /**
   * Take `push` of `node`'s own report branch in the bare repository `dir`, `body` being its
   * whole request body; receive-pack's answer, or null when git must take the push.
   */
  receive(dir: string, node: string, push: PushCommands, body: Buffer): Promise<Buffer | null>;
  /** Stop the `git gc --auto` runs it started, and take no more pushes. */
  close(): Promise<void>;
}

export function reportReceiver(): ReportReceiver {
  const hashes = new Map<string, { stamp: string; hash: Hash | null }>();
  const taken = new Map<string, number>();
  const gcs = new Map<string, ChildProcess>();
  let closed = false;

  /** The object format of `dir` when git's defaults hold there for what a push changes; null when git must take every push. */
  const hashOf = async (dir: string): Promise<Hash | null> => {
    const stamp = stat(join(dir, 'config'))?.stamp ?? '';
    const known = hashes.get(dir);
    if (known?.stamp === stamp) return known.hash;
    const hash = await readSettings(dir);
    hashes.set(dir, { stamp, hash });
    return hash;
  };

  const collect = (dir: string): void => {
    const count = (taken.get(dir) ?? 0) + 1;
    taken.set(dir, count);
    if (count % GC_EVERY !== 0 || gcs.has(dir) || closed) return;
    let child: ChildProcess & { stdin: NodeJS.WritableStream; stdout: NodeJS.ReadableStream; stderr: NodeJS.ReadableStream };
    try {
      child = spawnGit(dir, ['-c', 'gc.autoDetach=false', 'gc', '--auto', '--quiet']);
    } catch {
      return; // the push has landed; its gc waits for the next one
    }
    gcs.set(dir, child);
    child.stdin.end();
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', () => {});
    child.on('close', () => gcs.delete(dir));
  };

  /** receive(), which may throw. */
  const take = async (dir: string, node: string, push: PushCommands, body: Buffer): Promise<Buffer | null> => {
    const update = push.updates[0];
    if (closed || !update || push.updates.length !== 1 || push.shallow || update.ref !== reportRef(node)) return null;
    if (!push.capabilities.every((c) => CAPABILITY.test(c))) return null;
    const hash = await hashOf(dir);
    if (hash === null || update.new.length !== hexLength(hash) || update.old.length !== hexLength(hash)) return null;
    const objects = readPack(body.subarray(push.headLength), hash);
    const reached = objects && reach(objects, update.new, hash);
    if (!objects || !reached || reached.order.length !== objects.size) return null;
    if (!(await land(dir, update, objects, reached, hash))) return null;
    collect(dir);
    return acceptedResult(push.updates, push.capabilities);
  };

  return {
    async receive(dir, node, push, body) {
      try {
        return await take(dir, node, push, body);
      } catch {
        return null; // anything unforeseen (a config that cannot be read, say): git decides, as it did before
      }
    },
    async close() {
      closed = true;
      const running = [...gcs.values()];
      await Promise.all(running.map((child) => new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('close', () => resolve());
        child.kill('SIGTERM');
      })));
    },
  };
}

/** Settings under which git's receive-pack does more than take the objects and move the ref (boolean ones, false by default). */
const WATCHED = ['core.logallrefupdates', 'core.sharedrepository', 'receive.fsckobjects', 'transfer.fsckobjects', 'receive.denynonfastforwards', 'receive.updateserverinfo'];

/** `dir`'s object format, or null when a WATCHED setting is on (or the config cannot be read). */
async function readSettings(dir: string): Promise<Hash | null> {
  let text: string;
  try {
    const keys = ['extensions.objectformat', ...WATCHED].map((key) => key.replace('.', '\\.'));
    text = (await gitBytes(dir, ['--git-dir=.', 'config', '--get-regexp', `^(${keys.join('|')})$`])).toString('utf8');
  } catch (e) {
    // Exit 1 is "no such setting": git's defaults hold.
    if ((e as { data?: { code?: number } }).data?.code !== 1) return null;
    text = '';
  }
  let hash: Hash = 'sha1';
  for (const line of text.split('\n').filter(Boolean)) {
    const space = line.indexOf(' ');
    const key = space < 0 ? line : line.slice(0, space);
    const value = space < 0 ? 'true' : line.slice(space + 1).trim().toLowerCase();
    if (key === 'extensions.objectformat') {
      if (value !== 'sha1' && value !== 'sha256') return null;
      hash = value;
    } else if (WATCHED.includes(key) && !['false', 'no', 'off', '0', ''].includes(value)) {
      return null;
    }
  }
  return hash;
}

function hexLength(hash: Hash): number {
  return hash === 'sha1' ? 40 : 64;
}

/** Every object of a pack of whole objects (commits, trees, blobs) by the id computed from its content; null when it is anything else. */
export function readPack(pack: Buffer, hash: Hash): Map<string, PackObject> | null {
  const sum = hexLength(hash) / 2;
  if (pack.length < 12 + sum || pack.toString('latin1', 0, 4) !== 'PACK') return null;
  const version = pack.readUInt32BE(4);
  const count = pack.readUInt32BE(8);
  if ((version !== 2 && version !== 3) || count > MAX_OBJECTS) return null;
  const end = pack.length - sum;
  if (!createHash(hash).update(pack.subarray(0, end)).digest().equals(pack.subarray(end))) return null;
  const objects = new Map<string, PackObject>();
  let at = 12;
  for (let i = 0; i < count; i++) {
    if (at >= end) return null;
    let c = pack[at++]!;
    const type = TYPES[(c >> 4) & 7]; // 4 (a tag), 6 and 7 (deltas) are not what a host sends
    let size = c & 15;
    for (let shift = 4; c & 0x80; shift += 7) {
      if (at >= end || shift > 28) return null;
      c = pack[at++]!;
      size += (c & 0x7f) * 2 ** shift;
    }
    if (type === undefined || size > MAX_REPORT_FILE) return null;
    let inflated: { buffer: Buffer; engine: Inflate };
    try {
      // zlib stops at the end of the object's stream and says how much of the input it read.
      inflated = inflateSync(pack.subarray(at, end), { info: true } as object) as unknown as typeof inflated;
    } catch {
      return null;
    }
    if (inflated.buffer.length !== size) return null;
    at += inflated.engine.bytesWritten;
    const oid = createHash(hash).update(`${type} ${size}\0`).update(inflated.buffer).digest('hex');
    objects.set(oid, { type, data: inflated.buffer });
  }
  return at === end ? objects : null;
}

/** What the new tip `tip` reaches: the pack's objects in the order met, and the parents it names that the pack lacks. */
interface Reached {
  order: string[];
  outside: Set<string>;
}

/** The objects `tip` reaches in `objects`, when each is there with the type its name says and none is what the hook refuses or doubts; null otherwise. */
export function reach(objects: Map<string, PackObject>, tip: string, hash: Hash): Reached | null {
  const seen = new Set<string>();
  const order: string[] = [];
  const outside = new Set<string>();
  const take = (oid: string, type: ObjectType): PackObject | null => {
    const object = objects.get(oid);
    if (object?.type !== type) return null;
    if (!seen.has(oid)) {
      seen.add(oid);
      order.push(oid);
    }
    return object;
  };
  const tree = (oid: string, top: boolean): boolean => {
    const object = take(oid, 'tree');
    const entries = object && wholeTreeEntries(object.data, hexLength(hash) / 2);
    if (!entries) return false;
    for (const e of entries) {
      if (e.name === '' || e.name === '.' || e.name === '..' || e.name === '.git' || e.name.includes('/')) return false;
      if (e.mode === '40000') {
        if (!tree(e.oid, false)) return false;
        continue;
      }
      if (e.mode !== '100644' && e.mode !== '100755' && e.mode !== '120000') return false; // a submodule, or a mode git would flag
      const blob = take(e.oid, 'blob');
      if (!blob) return false;
      // An enrolment report: git's hook records the token's use (hooks.ts). Any mention goes there.
      if (top && e.name === STATUS_FILE && blob.data.includes('enrolment')) return false;
    }
    return true;
  };
  const pending = [tip];
  for (let commits = 0; pending.length > 0; commits++) {
    const oid = pending.pop()!;
    if (seen.has(oid)) continue;
    const object = take(oid, 'commit');
    const parsed = object && parseCommitObject(object.data);
    if (!parsed?.ok || commits >= MAX_COMMITS || parsed.commit.tree.length !== hexLength(hash)) return null;
    if (!tree(parsed.commit.tree, true)) return null;
    for (const parent of parsed.commit.parents) {
      if (parent.length !== hexLength(hash)) return null;
      if (objects.has(parent)) pending.push(parent);
      else outside.add(parent);
    }
  }
  return { order, outside };
}

/** Write the push's objects and move its ref, under git's lock; false (nothing moved) when git must take the push. */
async function land(dir: string, update: { old: string; new: string; ref: string }, objects: Map<string, PackObject>, reached: Reached, hash: Hash): Promise<boolean> {
  const ref = join(dir, update.ref);
  const lockFile = `${ref}.lock`;
  let lock: FileHandle;
  try {
    await mkdir(dirname(ref), { recursive: true });
    lock = await open(lockFile, 'wx', 0o644); // held: git (or another push) is updating the ref, and git will say so
  } catch {
    return false;
  }
  let moved = false;
  try {
    const current = refFromFiles(dir, update.ref);
    if (current === undefined || (current ?? '0'.repeat(hexLength(hash))) !== update.old) return false;
    if (current === null && nestedRefs(dir, update.ref)) return false;
    const known = new Set(current === null ? [] : [current]);
    if (current !== null && [...reached.outside].some((p) => !known.has(p))) {
      for (const parent of (await looseParents(dir, current)) ?? []) known.add(parent);
    }
    if ([...reached.outside].some((p) => !known.has(p))) return false;
    await writeObjects(dir, reached.order.map((oid) => [oid, objects.get(oid)!]));
    await lock.writeFile(`${update.new}\n`);
    await lock.sync();
    await lock.close();
    await rename(lockFile, ref);
    moved = true;
    return true;
  } catch {
    return false;
  } finally {
    if (!moved) {
      await lock.close().catch(() => {});
      await rm(lockFile, { force: true }).catch(() => {});
    }
  }
}

/** Whether refs already live under `ref` as a folder (git refuses to create a ref there). */
function nestedRefs(dir: string, ref: string): boolean {
  const names = packedRefNames(dir);
  if (names === undefined) return true;
  for (const name of names) if (name.startsWith(`${ref}/`)) return true;
  return false;
}

/** The parents of commit `oid` when it is a loose object of `dir`; null when it is not (packed: git must look). */
async function looseParents(dir: string, oid: string): Promise<string[] | null> {
  try {
    const raw = inflateSync(await readFile(join(dir, 'objects', oid.slice(0, 2), oid.slice(2))));
    const nul = raw.indexOf(0);
    if (nul < 0 || !raw.toString('latin1', 0, nul).startsWith('commit ')) return null;
    const parsed = parseCommitObject(raw.subarray(nul + 1));
    return parsed.ok ? parsed.commit.parents : null;
  } catch {
    return null;
  }
}

/** Write `objects` as loose objects of `dir` (those it has loose already are left), each synced, then their folders; the syncs of each step run at once. */
async function writeObjects(dir: string, objects: Array<[string, PackObject]>): Promise<void> {
  const written = await Promise.all(objects.map(async ([oid, object]) => {
    const file = join(dir, 'objects', oid.slice(0, 2), oid.slice(2));
    if (await exists(file)) return null;
    const folder = dirname(file);
    await mkdir(folder, { recursive: true });
    const temporary = join(folder, `tmp_obj_${randomBytes(6).toString('hex')}`);
    try {
      const handle = await open(temporary, 'wx', 0o444);
      try {
        // core.looseCompression's default: 1, the fastest.
        await handle.writeFile(deflateSync(Buffer.concat([Buffer.from(`${object.type} ${object.data.length}\0`), object.data]), { level: 1 }));
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, file);
    } catch (e) {
      await rm(temporary, { force: true });
      throw e;
    }
    return folder;
  }));
  const folders = new Set(written.filter((f): f is string => f !== null));
  await Promise.all([...folders].map(async (folder) => {
    const handle = await open(folder, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }));
}

async function exists(path: string): Promise<boolean> {
  return statFile(path).then(() => true, () => false);
}
