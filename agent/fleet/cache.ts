/**
 * The host's git cache is a cache: everything in it but unsent reports can be fetched again.
 * A cache that a crash, a full disk or a person left unreadable (garbage in HEAD, the config or a
 * ref, a truncated pack or index, an empty loose object, a tip whose objects are gone) is moved aside
 * to `<gitdir>.unreadable` and started afresh, instead of failing every pass as a bug: main is
 * fetched again by the pass, and the report branches the old cache had are adopted from the
 * server. A note of what happened is kept in the new cache until a report carrying it is pushed.
 *
 * The check is cheap enough for every open: file heads and tails, sizes, and the tips' commits
 * and top folders. A bit flipped inside a pack that leaves its size and trailer intact is not
 * found here; reading it fails the pass as before.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import git from 'isomorphic-git';
import { readable } from './fetch.js';

const NOTE = 'mesh-recovered';
const ADOPT = 'mesh-adopt';
const OID = /^[0-9a-f]{40}$/;

/** What makes the cache at `gitdir` unreadable, or null when it looks sound. */
export async function cacheFault(gitdir: string, cache: object): Promise<string | null> {
  try {
    if (!fs.existsSync(join(gitdir, 'HEAD'))) return 'HEAD is missing';
    const head = fs.readFileSync(join(gitdir, 'HEAD'), 'utf8').trim();
    if (!/^ref: refs\/\S+$/.test(head) && !OID.test(head)) return `HEAD holds ${JSON.stringify(head.slice(0, 40))}`;
    if ((await git.getConfig({ fs, gitdir, path: 'remote.origin.fetch' })) === undefined) return 'its config names no fetch refspec for origin';
    const shallow = join(gitdir, 'shallow');
    if (fs.existsSync(shallow) && fs.readFileSync(shallow, 'utf8').split('\n').some((l) => l !== '' && !OID.test(l))) return 'the shallow file holds something other than commit ids';
    for (const ref of looseRefs(gitdir)) {
      const text = fs.readFileSync(join(gitdir, ref), 'utf8').trim();
      if (!OID.test(text) && !/^ref: refs\/\S+$/.test(text)) return `${ref} holds ${JSON.stringify(text.slice(0, 40))}`;
    }
    const pack = packFault(gitdir);
    if (pack) return pack;
    const empty = emptyLoose(gitdir);
    if (empty) return `the loose object ${empty} is empty`;
    for (const branch of await git.listBranches({ fs, gitdir })) {
      const tip = await git.resolveRef({ fs, gitdir, ref: `refs/heads/${branch}` });
      if (!(await readable(gitdir, tip, cache))) return `the tip ${tip.slice(0, 12)} of ${branch} cannot be read`;
    }
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Move the cache aside (replacing an earlier one) and remember, for the fresh one, its report branches and why. */
export function moveAside(gitdir: string, fault: string): { aside: string; note: string; reports: string[] } {
  const aside = `${gitdir}.unreadable`;
  const reportsDir = join(gitdir, 'refs/heads/reports');
  const reports = safe(() => fs.readdirSync(reportsDir).map((n) => `refs/heads/reports/${n}`), []);
  fs.rmSync(aside, { recursive: true, force: true });
  fs.renameSync(gitdir, aside);
  return { aside, reports, note: `the local git cache ${gitdir} was unreadable (${fault}): moved aside to ${aside} and fetched again` };
}

/** After `init` made the fresh cache: keep the note and the report branches still to adopt. */
export function rememberRecovery(gitdir: string, note: string, reports: string[]): void {
  fs.writeFileSync(join(gitdir, NOTE), note + '\n');
  if (reports.length > 0) fs.writeFileSync(join(gitdir, ADOPT), reports.join('\n') + '\n');
}

/** The note of a recovery whose report has not been pushed yet, or null. */
export function recoveryNote(gitdir: string): string | null {
  return safe(() => fs.readFileSync(join(gitdir, NOTE), 'utf8').trim() || null, null);
}

/** A report carrying the note has reached the server. */
export function forgetRecovery(gitdir: string): void {
  fs.rmSync(join(gitdir, NOTE), { force: true });
}

/** Report branches of a moved-aside cache still to be adopted from the server. */
export function pendingAdoptions(gitdir: string): string[] {
  return safe(() => fs.readFileSync(join(gitdir, ADOPT), 'utf8').split('\n').filter(Boolean), []);
}

/** Record which adoptions are still pending (none: done). */
export function setPendingAdoptions(gitdir: string, refs: string[]): void {
  if (refs.length === 0) fs.rmSync(join(gitdir, ADOPT), { force: true });
  else fs.writeFileSync(join(gitdir, ADOPT), refs.join('\n') + '\n');
}

/** Every pack must have its index, start as a pack, and end with the checksum its index names (only heads and tails are read). */
function packFault(gitdir: string): string | null {
  const dir = join(gitdir, 'objects/pack');
  const files = safe(() => fs.readdirSync(dir), [] as string[]);
  for (const idx of files.filter((f) => f.endsWith('.idx'))) {
    const name = idx.replace(/\.idx$/, '');
    const index = ends(join(dir, idx), 8 + 1024, 40);
    if (index.size < 8 + 1024 + 40 || index.head.readUInt32BE(0) !== 0xff744f63) return `the pack index ${idx} is not one`;
    if (index.size < 8 + 1024 + index.head.readUInt32BE(8 + 255 * 4) * 28 + 40) return `the pack index ${idx} is truncated`;
    if (!files.includes(`${name}.pack`)) return `the pack ${name}.pack is missing`;
    const pack = ends(join(dir, `${name}.pack`), 4, 20);
    if (pack.size < 32 || pack.head.toString('latin1') !== 'PACK' || !pack.tail.equals(index.tail.subarray(0, 20))) return `the pack ${name}.pack is truncated or damaged`;
  }
  return null;
}

/** The first `head` and last `tail` bytes of `file`, and its size. */
function ends(file: string, head: number, tail: number): { size: number; head: Buffer; tail: Buffer } {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const h = Buffer.alloc(Math.min(head, size));
    const t = Buffer.alloc(Math.min(tail, size));
    fs.readSync(fd, h, 0, h.length, 0);
    fs.readSync(fd, t, 0, t.length, size - t.length);
    return { size, head: h, tail: t };
  } finally {
    fs.closeSync(fd);
  }
}

/** The first loose object that is an empty file (what a crash before the data reached the disk leaves), or null. */
function emptyLoose(gitdir: string): string | null {
  const objects = join(gitdir, 'objects');
  for (const d of safe(() => fs.readdirSync(objects), [] as string[]).filter((x) => /^[0-9a-f]{2}$/.test(x))) {
    for (const f of fs.readdirSync(join(objects, d))) if (fs.statSync(join(objects, d, f)).size === 0) return d + f;
  }
  return null;
}

/** Ref files under refs/, as paths relative to `gitdir`. */
function looseRefs(gitdir: string, dir = 'refs'): string[] {
  const entries = safe(() => fs.readdirSync(join(gitdir, dir), { withFileTypes: true }), []);
  return entries.flatMap((e) => (e.isDirectory() ? looseRefs(gitdir, `${dir}/${e.name}`) : e.isFile() ? [`${dir}/${e.name}`] : []));
}

function safe<T>(read: () => T, otherwise: T): T {
  try {
    return read();
  } catch {
    return otherwise;
  }
}
