/**
 * The node's age identity as a file: read without loading the age library (a pass that reads no
 * secret needs only its recipient, for the report). Making one, and decrypting with it, is in
 * host.ts, which main.ts loads only when a pass needs it.
 */
import { readFileSync } from 'node:fs';
import { MeshError, messageOf } from '../../core/errors.js';
import type { HostPaths } from '../paths.js';

/**
 * The identity file's secret key line and its recipient, or null when there is no identity file.
 * A file that is there but does not read is never taken for none (a new identity would be written
 * over the only key to the node's secrets): it stops the pass for a person (E_AGE_IDENTITY).
 */
export function readIdentity(paths: HostPaths): { identity: string; recipient: string | null } | null {
  let text: string;
  try {
    text = readFileSync(paths.ageIdentity, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw unreadable(paths, (e as NodeJS.ErrnoException).code ?? messageOf(e));
  }
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const identity = lines.find((l) => /^AGE-SECRET-KEY-1[0-9A-Z]{58}$/.test(l));
  if (!identity) throw unreadable(paths, 'it holds no AGE-SECRET-KEY-1 line');
  const named = lines.find((l) => l.startsWith('# public key: '));
  return { identity, recipient: named ? named.slice('# public key: '.length) : null };
}

function unreadable(paths: HostPaths, why: string): MeshError {
  return new MeshError(
    'E_AGE_IDENTITY',
    `the node's age identity ${paths.ageIdentity} cannot be read (${why}); it holds the only key to this node's secrets, so mesh-host applies nothing and keeps it as it is. ` +
      "Restore it from a backup; or move it away: the next pass makes a new one and its report names the new recipient, to which an operator then re-encrypts the node's secrets ('mesh-cli secret rekey')",
    { next: 'human' },
  );
}

/** Make the node's identity when it has none (a host enrolled before secrets existed): its next report names the recipient. */
export async function ensureIdentity(paths: HostPaths, ctx: { now: () => Date; load: { secrets?(): Promise<{ ensureIdentity(paths: HostPaths, now: Date): Promise<string> }> } }): Promise<void> {
  if (readIdentity(paths)?.recipient || !ctx.load.secrets) return;
  await (await ctx.load.secrets()).ensureIdentity(paths, ctx.now());
}
