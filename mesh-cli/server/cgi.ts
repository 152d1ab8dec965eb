import type { Readable } from 'node:stream';

/** The head of a CGI response: the status (from `Status:`, default 200) and the other headers in order. */
export interface CgiHead {
  status: number;
  headers: Array<[string, string]>;
}

/** Parse a CGI header block (the text before the blank line). */
export function parseCgiHead(text: string): CgiHead {
  let status = 200;
  const headers: Array<[string, string]> = [];
  for (const line of text.split(/\r?\n/)) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`malformed CGI header line: ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') {
      const code = Number.parseInt(value, 10);
      if (!(code >= 100 && code <= 599)) throw new Error(`malformed CGI status: ${JSON.stringify(value)}`);
      status = code;
    } else {
      headers.push([name, value]);
    }
  }
  return { status, headers };
}

/** Where the header block ends in `buf`: the index of the body and of the blank line, or null. */
function findHeadEnd(buf: Buffer): { head: number; body: number } | null {
  const crlf = buf.indexOf('\r\n\r\n');
  const lf = buf.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { head: crlf, body: crlf + 4 };
  if (lf >= 0) return { head: lf, body: lf + 2 };
  return null;
}

/**
 * Read a CGI program's stdout up to the blank line after its headers. Only the head is consumed:
 * the body stays in `stdout` (paused, the surplus unshifted) so the caller can stream it on.
 */
export function readCgiHead(stdout: Readable, maxBytes = 64 * 1024): Promise<CgiHead> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const done = (err: Error | null, head?: CgiHead): void => {
      stdout.off('data', onData);
      stdout.off('end', onEnd);
      stdout.off('error', onError);
      if (err) reject(err);
      else resolve(head!);
    };
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = findHeadEnd(buffered);
      if (end === null) {
        if (buffered.length > maxBytes) done(new Error(`CGI header block exceeds ${maxBytes} bytes`));
        return;
      }
      stdout.pause();
      const rest = buffered.subarray(end.body);
      if (rest.length > 0) stdout.unshift(rest);
      try {
        done(null, parseCgiHead(buffered.subarray(0, end.head).toString('latin1')));
      } catch (e) {
        done(e as Error);
      }
    };
    const onEnd = (): void => done(new Error('CGI program ended before sending its headers'));
    const onError = (e: Error): void => done(e);
    stdout.on('data', onData);
    stdout.on('end', onEnd);
    stdout.on('error', onError);
  });
}
