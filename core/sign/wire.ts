/**
 * The SSH wire format (RFC 4251 §5) as far as SSHSIG and OpenSSH keys need it: big-endian
 * uint32s, length-prefixed strings, and the "-----BEGIN X-----" base64 armor.
 *
 * The reader never reads past its buffer and never allocates from a length field: a
 * length larger than what is left is a WireError, whatever the field says.
 */

/** A malformed or truncated blob; only ever raised by this module. */
export class WireError extends Error {
  override name = 'WireError';
}

/** A uint32, big-endian. */
export function uint32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** An SSH "string": uint32 length, then the bytes (text is written as UTF-8). */
export function sshString(value: Uint8Array | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
  return Buffer.concat([uint32(bytes.length), bytes]);
}

/** Reads fields in order from one blob; throws WireError instead of reading out of bounds. */
export class WireReader {
  private pos = 0;

  constructor(private readonly buf: Buffer) {}

  /** The next n raw bytes. */
  bytes(n: number, what: string): Buffer {
    if (n > this.buf.length - this.pos) throw new WireError(`${what} is truncated`);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** The next uint32. */
  uint32(what: string): number {
    return this.bytes(4, what).readUInt32BE(0);
  }

  /** The next length-prefixed string, as bytes. */
  string(what: string): Buffer {
    return this.bytes(this.uint32(what), what);
  }

  /** The next length-prefixed string, as text. */
  text(what: string): string {
    return this.string(what).toString('utf8');
  }

  /** Insists that the blob has been read to its last byte. */
  end(what: string): void {
    if (this.pos !== this.buf.length) throw new WireError(`${what} has ${this.buf.length - this.pos} trailing bytes`);
  }
}

const LINE = 70; // OpenSSH's armor line length (SSHSIG_LINE_LEN)

/** Armors a blob the way OpenSSH does: base64 in lines of 70, between BEGIN and END lines. */
export function armor(label: string, blob: Uint8Array): string {
  const b64 = Buffer.from(blob).toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += LINE) lines.push(b64.slice(i, i + LINE));
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

/** The inverse of armor(); strict base64, tolerant of CRLF and surrounding blank space. */
export function dearmor(label: string, text: string, maxChars: number): Buffer {
  if (text.length > maxChars) throw new WireError(`armored text is longer than ${maxChars} characters`);
  const begin = `-----BEGIN ${label}-----`;
  const end = `-----END ${label}-----`;
  const trimmed = text.trim();
  if (!trimmed.startsWith(begin)) throw new WireError(`does not start with "${begin}"`);
  if (!trimmed.endsWith(end)) throw new WireError(`does not end with "${end}"`);
  const body = trimmed.slice(begin.length, trimmed.length - end.length).replace(/[\r\n]/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length % 4 !== 0) {
    throw new WireError('armored body is not valid base64');
  }
  return Buffer.from(body, 'base64');
}
