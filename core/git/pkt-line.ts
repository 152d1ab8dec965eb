/**
 * Git's pkt-line framing: four hex digits of length, then the payload; 0000 flush, 0001 delim,
 * 0002 response-end.
 * The host's poll (agent/fleet/ls-refs.ts) and report push (push.ts) speak it, and the server answers a poll with it (mesh-cli/server/ls-refs.ts).
 */
import { MeshError } from '../errors.js';

/** One pkt-line: four hex digits of length, then the line. */
export function pktLine(line: string): string {
  return (Buffer.byteLength(line) + 4).toString(16).padStart(4, '0') + line;
}

/** The payloads of the pkt-lines in `buf`; a flush, delim or response-end packet is its number (0, 1, 2). Throws E_PACK on a bad length. */
export function* pktLines(buf: Buffer): Generator<Buffer | number> {
  let at = 0;
  while (at < buf.length) {
    const len = parseInt(buf.toString('latin1', at, at + 4), 16);
    if (!(len >= 0) || at + Math.max(len, 4) > buf.length || len === 3) throw brokenResponse(`bad pkt-line length at byte ${at}`);
    if (len < 4) yield len;
    else yield buf.subarray(at + 4, at + len);
    at += Math.max(len, 4);
  }
}

/** The text lines of `buf` up to its first flush (or its end), without their newlines; null when the framing is broken. */
export function pktTextLines(buf: Buffer): string[] | null {
  const lines: string[] = [];
  try {
    for (const p of pktLines(buf)) {
      if (typeof p === 'number') break;
      lines.push(p.toString('utf8').replace(/\n$/, ''));
    }
  } catch {
    return null;
  }
  return lines;
}

/** The error for a response or pack that does not parse: the server (or the network) broke it; retrying may help. */
function brokenResponse(why: string): MeshError {
  return new MeshError('E_PACK', `the server sent a broken pack or response (${why}); try again, and report a bug if it persists`, { next: 'retry' });
}
