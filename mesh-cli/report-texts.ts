/**
 * The exact text of each node's last report (status.json and status.json.sig), beside the
 * report index in `.git/mesh/report-texts.bin`. The index keeps what status shows; these texts
 * are read only when a report must be verified again because the node.yaml it was checked
 * against changed on main (a revocation, a new token). A flat binary file, because it is
 * rewritten whenever reports change and JSON-escaping 10,000 signed texts is what made the
 * index slow: per report four length-prefixed fields (node, commit, status, signature), a
 * length of 0xffffffff standing for "none".
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { tempBeside } from './status/temp-file.js';

/** A report commit's texts, as bytes (decoded only when used). */
export interface ReportTexts {
  commit: string;
  status: Buffer | null;
  sig: Buffer | null;
}

const MAGIC = Buffer.from('mesh-report-texts 1\n');
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
      const [node, commit, status, sig] = [field(), field(), field(), field()];
      if (node && commit) texts.set(node.toString('utf8'), { commit: commit.toString('latin1'), status, sig });
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
  for (const [node, t] of texts) {
    const name = Buffer.from(node, 'utf8');
    const head = Buffer.allocUnsafe(12 + name.length + t.commit.length);
    let at = head.writeUInt32BE(name.length, 0);
    at += name.copy(head, at);
    at = head.writeUInt32BE(t.commit.length, at);
    at += head.write(t.commit, at, 'latin1');
    head.writeUInt32BE(length(t.status), at);
    parts.push(head);
    if (t.status) parts.push(t.status);
    const tail = Buffer.allocUnsafe(4);
    tail.writeUInt32BE(length(t.sig));
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
