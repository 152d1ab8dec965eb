/**
 * SHA-256-crypt (`$5$`, Drepper's "Unix crypt using SHA-256"), the format glibc's crypt(3)
 * reads, and so Apache's htpasswd provider: node.yaml keeps it beside the credential's sha256
 * so that a web server in front of the fleet repository can check a node's credential
 * (docs/servers.md). The credential is 32 random bytes, so the hash's rounds add no strength:
 * the fewest crypt allows (1,000) keep a request cheap on a server checking every one.
 */
import { createHash, randomBytes } from 'node:crypto';

const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ROUNDS = 1000;

/** `$5$rounds=1000$SALT$HASH` of `password`, with a new random salt (or `salt`, for tests). */
export function shaCrypt(password: string, salt = randomSalt()): string {
  return `$5$rounds=${ROUNDS}$${salt}$${encode(digest(Buffer.from(password, 'utf8'), Buffer.from(salt, 'latin1'), ROUNDS))}`;
}

/** Whether `hash` (as shaCrypt writes it) is the one of `password`. */
export function shaCryptMatches(password: string, hash: string): boolean {
  const m = /^\$5\$rounds=(\d+)\$([^$]{1,16})\$[./0-9A-Za-z]{43}$/.exec(hash);
  if (!m || Number(m[1]) !== ROUNDS) return false;
  return shaCrypt(password, m[2]!) === hash;
}

function randomSalt(): string {
  return [...randomBytes(16)].map((b) => ITOA64[b & 63]).join('');
}

const sha256 = (...parts: Buffer[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

/** `bytes` repeated to `length` bytes. */
function stretch(bytes: Buffer, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let at = 0; at < length; at += bytes.length) bytes.copy(out, at, 0, Math.min(bytes.length, length - at));
  return out;
}

function digest(p: Buffer, s: Buffer, rounds: number): Buffer {
  const b = sha256(p, s, p);
  const a = createHash('sha256').update(p).update(s);
  a.update(stretch(b, p.length));
  for (let n = p.length; n > 0; n >>= 1) a.update(n & 1 ? b : p);
  let c = a.digest();
  const pBytes = stretch(sha256(...Array<Buffer>(p.length).fill(p)), p.length);
  const sBytes = stretch(sha256(...Array<Buffer>(16 + c[0]!).fill(s)), s.length);
  for (let i = 0; i < rounds; i++) {
    const h = createHash('sha256');
    h.update(i & 1 ? pBytes : c);
    if (i % 3 !== 0) h.update(sBytes);
    if (i % 7 !== 0) h.update(pBytes);
    h.update(i & 1 ? c : pBytes);
    c = h.digest();
  }
  return c;
}

/** crypt's base-64 of the 32 bytes, in SHA-256-crypt's byte order. */
function encode(c: Buffer): string {
  let out = '';
  const put = (b2: number, b1: number, b0: number, n: number) => {
    let w = (b2 << 16) | (b1 << 8) | b0;
    for (let i = 0; i < n; i++, w >>= 6) out += ITOA64[w & 63];
  };
  for (let i = 0; i < 10; i++) {
    const [x, y, z] = [i * 21 % 30, (i * 21 + 10) % 30, (i * 21 + 20) % 30];
    put(c[x]!, c[y]!, c[z]!, 4);
  }
  put(0, c[31]!, c[30]!, 3);
  return out;
}
