/**
 * The exact text of each node's last report (status.json and status.json.sig), beside the
 * report index in `.git/mesh/report-texts.bin`. The index keeps what status shows; these texts
 * are read only when a report must be verified again because the node.yaml it was checked
 * against changed on main (a revocation, a new token), or shown again because the index's line of
 * reports was damaged. A flat binary file, because it is rewritten whenever reports change and
 * JSON-escaping 10,000 signed texts is what made the index slow: per report six length-prefixed
 * fields (node, commit, status.json's blob id, its text, the signature's blob id, its text), a
 * length of 0xffffffff standing for "none". The blob ids come from the report's tree as fetched:
 * a text is used only when it still hashes to its id (`intact`), so that a damaged file is never
 * judged or shown as the node's report.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { tempBeside } from './status/temp-file.js';

/** A report commit's texts, as bytes (decoded only when used), with their git blob ids. */
export interface ReportTexts {
  commit: string;
  status: Buffer | null;
  sig: Buffer | null;
  statusId: string | null;
  sigId: string | null;
}

/** Format 1 had no blob ids: such a file reads as empty, and its texts are fetched again when needed. */
const MAGIC = Buffer.from('mesh-report-texts 2\n');
const NONE = 0xffffffff;

/** node → texts; an unreadable or missing file reads as empty (the texts are then fetched again when needed). */
export function readTexts(file: string): Map<string, ReportTexts> {
  const texts = new Map<string, ReportTexts>();
  if (!existsSync(file)) return texts;
  const buf = readFileSync(file);
  if (!buf.subarray(0, MAGIC.length).equals(MAGIC)) return texts;
  let at = MAGIC.length;
  const field = (): Buffer | null => {
    if (at + 4 > buf.length) throw new RangeError('cut off');
    const len = buf.readUInt32BE(at);
    at += 4;
    if (len === NONE) return null;
    if (at + len > buf.length) throw new RangeError('cut off');
    at += len;
    return buf.subarray(at - len, at);
  };
  try {
    while (at < buf.length) {
      const [node, commit, statusId, status, sigId, sig] = [field(), field(), field(), field(), field(), field()];
      const id = (b: Buffer | null) => b?.toString('latin1') ?? null;
      if (node && commit) texts.set(node.toString('utf8'), { commit: commit.toString('latin1'), status, sig, statusId: id(statusId), sigId: id(sigId) });
    }
  } catch {
    // a cut-off file keeps the records before the cut
  }
  return texts;
}

/**
 * Replace the file with `texts`. The texts are written from where they lie (views of the fetched
 * packs), with one small buffer of lengths, node and commit before each, by the thread pool: at
 * 10,000 reports that is 17 MB, whose copying would otherwise hold the calling thread ~0.1 s.
 */
export async function writeTexts(file: string, texts: Map<string, ReportTexts>): Promise<void> {
  const parts: Uint8Array[] = [MAGIC];
  const length = (b: Uint8Array | null) => (b === null ? NONE : b.length);
  /** An id's length and text, then the length of the text it names (which follows, as a part of its own). */
  const idThenLength = (head: Buffer, at: number, id: string | null, text: Buffer | null) => {
    at = head.writeUInt32BE(id === null ? NONE : id.length, at);
    if (id !== null) at += head.write(id, at, 'latin1');
    return head.writeUInt32BE(length(text), at);
  };
  for (const [node, t] of texts) {
    const name = Buffer.from(node, 'utf8');
    const head = Buffer.allocUnsafe(16 + name.length + t.commit.length + (t.statusId?.length ?? 0));
    let at = head.writeUInt32BE(name.length, 0);
    at += name.copy(head, at);
    at = head.writeUInt32BE(t.commit.length, at);
    at += head.write(t.commit, at, 'latin1');
    idThenLength(head, at, t.statusId, t.status);
    parts.push(head);
    if (t.status) parts.push(t.status);
    const tail = Buffer.allocUnsafe(8 + (t.sigId?.length ?? 0));
    idThenLength(tail, 0, t.sigId, t.sig);
    parts.push(tail);
    if (t.sig) parts.push(t.sig);
  }
  await mkdir(dirname(file), { recursive: true });
  const tmp = tempBeside(file);
  const out = await open(tmp, 'w');
  try {
    await out.writev(parts);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  } finally {
    await out.close();
  }
  await rename(tmp, file);
}

/** Whether each text still hashes to the blob id it was fetched as (a text without an id, or an id without a text, does not). */
export function intact(t: ReportTexts): boolean {
  return blobMatches(t.status, t.statusId) && blobMatches(t.sig, t.sigId);
}

function blobMatches(text: Buffer | null, id: string | null): boolean {
  if (text === null || id === null) return text === id;
  const hash = createHash(id.length === 64 ? 'sha256' : 'sha1').update(`blob ${text.length}\0`).update(text);
  return hash.digest('hex') === id;
}
