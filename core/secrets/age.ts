/**
 * The age format through `age-encryption` (no cryptography of our own): X25519 identities and
 * recipients, and armored blocks that the `age` CLI and sops also read. An identity file is
 * written as age-keygen writes one (comments, then the AGE-SECRET-KEY line), so `age -d -i FILE`
 * reads it.
 *
 * age-encryption uses Node's Web Crypto X25519, which Node 20 before 20.20 (Debian 13's nodejs is
 * 20.19) calls experimental with a warning on stderr at its first use: every `enrol`, and every
 * pass that reads a secret, would print it to a person or a journal that can do nothing about it.
 * Each function here first turns that one warning off (`quietX25519`); any other warning stays.
 */
import { armor, Decrypter, Encrypter, generateX25519Identity, identityToRecipient } from 'age-encryption';

let quieted = false;

/** Drop Node's "X25519 Web Crypto API algorithm is an experimental feature" warning from this process (once; idempotent). */
export function quietX25519(): void {
  if (quieted) return;
  quieted = true;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    if (/\bX25519 Web Crypto API algorithm\b/.test(text)) return;
    emit(warning, ...rest);
  }) as typeof process.emitWarning;
}

export interface AgeIdentity {
  /** AGE-SECRET-KEY-1… */
  identity: string;
  /** age1… */
  recipient: string;
}

/** A new X25519 identity. */
export async function newIdentity(): Promise<AgeIdentity> {
  quietX25519();
  const identity = await generateX25519Identity();
  return { identity, recipient: await identityToRecipient(identity) };
}

/** An identity file's text, as age-keygen writes it. */
export function identityFileText(id: AgeIdentity, created: Date): string {
  return `# created: ${created.toISOString()}\n# public key: ${id.recipient}\n${id.identity}\n`;
}

/** The identity in an identity file's text (age-keygen's or ours), or null when it holds none. */
export async function parseIdentityFile(text: string): Promise<AgeIdentity | null> {
  const line = text.split(/\r?\n/).map((l) => l.trim()).find((l) => l.startsWith('AGE-SECRET-KEY-1'));
  if (!line) return null;
  quietX25519();
  return { identity: line, recipient: await identityToRecipient(line) };
}

/** `text` encrypted to every one of `recipients`, armored. */
export async function encryptTo(recipients: string[], text: string): Promise<string> {
  quietX25519();
  const e = new Encrypter();
  for (const r of recipients) e.addRecipient(r);
  return armor.encode(await e.encrypt(text));
}

/** The plaintext of the armored `block` with `identity`, or null when it is not encrypted to that identity. */
export async function decryptWith(identity: string, block: string): Promise<string | null> {
  quietX25519();
  const d = new Decrypter();
  d.addIdentity(identity);
  try {
    return await d.decrypt(armor.decode(block.replace(/\r\n/g, '\n').trim() + '\n'), 'text');
  } catch (e) {
    if (e instanceof Error && /no identity matched/.test(e.message)) return null;
    throw e;
  }
}
