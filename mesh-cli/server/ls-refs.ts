/**
 * The hosts' poll answered in-process. Every host asks, once a minute, which commit main is at:
 * a protocol-v2 `ls-refs` POST with `ref-prefix refs/heads/main` (agent/fleet/ls-refs.ts). Through
 * git that is `git http-backend` starting `git upload-pack`, two processes for one line; 10,000
 * hosts make ~170 of them a second. This answers exactly that request from main's ref files
 * (main-stamp.ts) without git. Anything else — other refs, other arguments (peel, symrefs,
 * unborn), other capabilities, refs that are not plain files — returns null and goes to git as
 * before, with the same access rules (the request was authorised before it got here).
 */
import { pktLine, pktLines } from '../../core/git/pkt-line.js';
import { mainTipFromFiles } from './main-stamp.js';

/** The largest request body read to see whether it is a poll of main (a poll is ~100 bytes). */
export const MAX_POLL_BODY = 4096;

/** The answer to `body` when it is an ls-refs of main alone in the bare repository `dir`; null when git must answer. */
export function answerMainPoll(body: Buffer, dir: string): Buffer | null {
  const request = parseLsRefs(body);
  if (request === null) return null;
  const main = mainTipFromFiles(dir);
  if (main === null || request.some((prefix) => prefix !== main.ref)) return null;
  return Buffer.from((main.oid === null ? '' : pktLine(`${main.oid} ${main.ref}\n`)) + '0000');
}

/** The ref prefixes of an ls-refs request that says nothing else (an agent and the sha1 object format aside); null otherwise. */
function parseLsRefs(body: Buffer): string[] | null {
  const lines: Array<string | number> = [];
  try {
    for (const p of pktLines(body)) lines.push(typeof p === 'number' ? p : p.toString('utf8').replace(/\n$/, ''));
  } catch {
    return null;
  }
  const delim = lines.indexOf(1);
  if (lines[0] !== 'command=ls-refs' || delim < 0 || lines.at(-1) !== 0 || lines.indexOf(0) !== lines.length - 1) return null;
  const capabilities = lines.slice(1, delim);
  if (!capabilities.every((c) => typeof c === 'string' && (c.startsWith('agent=') || c === 'object-format=sha1'))) return null;
  const args = lines.slice(delim + 1, -1);
  const prefixes = args.map((a) => (typeof a === 'string' && a.startsWith('ref-prefix ') ? a.slice('ref-prefix '.length) : null));
  return prefixes.length > 0 && prefixes.every((p): p is string => p !== null) ? prefixes : null;
}
