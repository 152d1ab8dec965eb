/**
 * The operators of `mesh-cli serve`: DATA/operators (mode 0600), one `name:sha256hex` line per
 * operator; the credential itself is shown once, when it is made, and never stored. The file is
 * read again whenever it changes, so an operator is added or removed without a restart.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The operators file of the data folder `data`. */
export function operatorsFile(data: string): string {
  return join(data, 'operators');
}

/** sha256 (hex) of a password: what node.yaml and the operators file keep. */
export function passwordHash(password: string): string {
  return createHash('sha256').update(password, 'utf8').digest('hex');
}

/** Whether `password` hashes to `hex`, in time that does not depend on where they differ. */
export function matchesHash(password: string, hex: string): boolean {
  const want = Buffer.from(hex, 'hex');
  const got = createHash('sha256').update(password, 'utf8').digest();
  return want.length === got.length && timingSafeEqual(want, got);
}

/** A new random credential secret (32 bytes, base64url). */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** Create the operators file with one operator `name` when there is none; returns the new secret, or null if it existed. */
export function ensureOperators(data: string, name = 'operator'): string | null {
  const file = operatorsFile(data);
  if (existsSync(file)) return null;
  const secret = newSecret();
  writeFileSync(file, `# operators of mesh-cli serve: name:sha256(password), one per line\n${name}:${passwordHash(secret)}\n`, { mode: 0o600, flag: 'wx' });
  return secret;
}

/** Checks operator credentials against the operators file, re-reading it when it changes. */
export class Operators {
  private stamp = '';
  private hashes = new Map<string, string>();

  /** `ignored` is told of each line that names no operator (file:line, and what to write), at each read of the file. */
  constructor(
    private readonly file: string,
    private readonly ignored: (where: string, why: string) => void = () => {},
  ) {}

  /** `ok`: an operator with this password; `bad`: an operator name with another password; `unknown`: no such operator. */
  check(user: string, password: string): 'ok' | 'bad' | 'unknown' {
    this.reload();
    const hash = this.hashes.get(user);
    if (hash === undefined) return 'unknown';
    return matchesHash(password, hash) ? 'ok' : 'bad';
  }

  private reload(): void {
    let stamp = 'missing';
    try {
      const st = statSync(this.file);
      stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch {
      // no file: no operators
    }
    if (stamp === this.stamp) return;
    this.stamp = stamp;
    this.hashes = new Map();
    if (stamp === 'missing') return;
    for (const [i, line] of readFileSync(this.file, 'utf8').split('\n').entries()) {
      const m = /^([^#:\s][^:\s]*):([0-9a-f]{64})\s*$/.exec(line);
      if (m) this.hashes.set(m[1]!, m[2]!);
      else if (line.trim() !== '' && !line.startsWith('#')) {
        this.ignored(`${this.file}:${i + 1}`, "not NAME:SHA256 (the password's sha256, 64 lower-case hex digits), so no operator signs in with it: write it as NAME:$(printf %s PASSWORD | sha256sum | cut -d' ' -f1)");
      }
    }
  }
}
