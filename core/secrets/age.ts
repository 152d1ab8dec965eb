/**
 * The age format through `age-encryption` (no cryptography of our own): X25519 identities and
 * recipients, and armored blocks that the `age` CLI and sops also read. An identity file is
 * written as age-keygen writes one (comments, then the AGE-SECRET-KEY line), so `age -d -i FILE`
 * reads it.
 */
import { armor, Decrypter, Encrypter, generateX25519Identity, identityToRecipient } from 'age-encryption';

export interface AgeIdentity {
  /** AGE-SECRET-KEY-1… */
  identity: string;
  /** age1… */
  recipient: string;
}

/** A new X25519 identity. */
export async function newIdentity(): Promise<AgeIdentity> {
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
  return { identity: line, recipient: await identityToRecipient(line) };
}

/** `text` encrypted to every one of `recipients`, armored. */
export async function encryptTo(recipients: string[], text: string): Promise<string> {
  const e = new Encrypter();
  for (const r of recipients) e.addRecipient(r);
  return armor.encode(await e.encrypt(text));
}

/** The plaintext of the armored `block` with `identity`, or null when it is not encrypted to that identity. */
export async function decryptWith(identity: string, block: string): Promise<string | null> {
  const d = new Decrypter();
  d.addIdentity(identity);
  try {
    return await d.decrypt(armor.decode(block.replace(/\r\n/g, '\n').trim() + '\n'), 'text');
  } catch (e) {
    if (e instanceof Error && /no identity matched/.test(e.message)) return null;
    throw e;
  }
}
