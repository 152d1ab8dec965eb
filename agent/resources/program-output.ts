/**
 * What a program a resource runs said (a command, its guards, a file's check), as a report line
 * carries it: the tail of its output, with the pass's secrets masked.
 */

const TAIL_LINES = 20;
const TAIL_BYTES = 2048;

/** `text` with every one of `secrets` (as it is, and in base64 and hex) replaced by a mark: a command's output goes into the report and the log. */
export function masked(text: string, secrets: string[] | undefined): string {
  if (!secrets || secrets.length === 0) return text;
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s === '') continue;
    const bytes = Buffer.from(s);
    const b64 = bytes.toString('base64');
    for (const f of [s, s.trim(), b64, b64.replace(/=+$/, ''), bytes.toString('base64url'), bytes.toString('hex'), bytes.toString('hex').toUpperCase()]) if (f.length >= 4) forms.add(f);
  }
  let out = text;
  for (const f of [...forms].sort((a, b) => b.length - a.length)) out = out.split(f).join('[secret masked]');
  return out;
}

/** The last lines of `text`, at most TAIL_LINES lines and TAIL_BYTES bytes. */
export function tail(text: string): string {
  const lines = text.replace(/\n$/, '').split('\n');
  let out = lines.slice(-TAIL_LINES).join('\n');
  const bytes = Buffer.from(out);
  if (bytes.length > TAIL_BYTES) out = bytes.subarray(bytes.length - TAIL_BYTES).toString().replace(/^\uFFFD+/, '');
  return out;
}
