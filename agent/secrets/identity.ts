/**
 * The node's age identity as a file: read without loading the age library (a pass that reads no
 * secret needs only its recipient, for the report). Making one, and decrypting with it, is in
 * host.ts, which main.ts loads only when a pass needs it.
 */
import { readFileSync } from 'node:fs';
import type { HostPaths } from '../paths.js';

/** The identity file's secret key line and its recipient, or null when there is no identity file. */
export function readIdentity(paths: HostPaths): { identity: string; recipient: string | null } | null {
  let text: string;
  try {
    text = readFileSync(paths.ageIdentity, 'utf8');
  } catch {
    return null;
  }
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const identity = lines.find((l) => l.startsWith('AGE-SECRET-KEY-1'));
  if (!identity) return null;
  const named = lines.find((l) => l.startsWith('# public key: '));
  return { identity, recipient: named ? named.slice('# public key: '.length) : null };
}

/** Make the node's identity when it has none (a host enrolled before secrets existed): its next report names the recipient. */
export async function ensureIdentity(paths: HostPaths, ctx: { now: () => Date; load: { secrets?(): Promise<{ ensureIdentity(paths: HostPaths, now: Date): Promise<string> }> } }): Promise<void> {
  if (readIdentity(paths)?.recipient || !ctx.load.secrets) return;
  await (await ctx.load.secrets()).ensureIdentity(paths, ctx.now());
}
