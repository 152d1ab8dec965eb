/**
 * The exact text of each node's last report (status.json and status.json.sig), beside the
 * report index in `.git/mesh/report-texts.bin`. The index keeps what status shows; these texts
 * are read only when a report must be verified again because the node.yaml it was checked
 * against changed on main (a revocation, a new token). A flat binary file, because it is
 * rewritten whenever reports change and JSON-escaping 10,000 signed texts is what made the
 * index slow: per report four length-prefixed fields (node, commit, status, signature), a
 * length of 0xffffffff standing for "none".
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

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

/** Replace the file with `texts`. */
export function writeTexts(file: string, texts: Map<string, ReportTexts>): void {
  const parts: Buffer[] = [MAGIC];
  const put = (b: Buffer | null) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b === null ? NONE : b.length);
    parts.push(len);
    if (b) parts.push(b);
  };
  for (const [node, t] of texts) {
    put(Buffer.from(node, 'utf8'));
    put(Buffer.from(t.commit, 'latin1'));
    put(t.status);
    put(t.sig);
  }
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, Buffer.concat(parts));
  renameSync(`${file}.tmp`, file);
}
