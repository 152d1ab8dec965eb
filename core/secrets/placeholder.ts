/**
 * What a template reads as `{{ secrets.NAME }}` wherever the value is not decrypted (mesh-cli's
 * plan, validate and status, and the declaration the host reports, digests and caches): an
 * opaque stand-in naming the secret and a short hash of its armored block. A new value (a new
 * block) changes the stand-in, so the declaration's digest, `plan` and `status --commit` see the
 * change, while the stand-in says nothing about the value itself.
 */
import { createHash } from 'node:crypto';
import type { PlacedSecret } from './levels.js';

/** The stand-in of the secret `name` whose armored block is `block`. */
export function placeholderOf(name: string, block: string): string {
  const hash = createHash('sha256').update(block.replace(/\r\n/g, '\n').trim()).digest('hex').slice(0, 16);
  return `[secret ${name} ${hash}]`;
}

/** The stand-ins of every secret in `secrets`, as a template scope. */
export function placeholders(secrets: Map<string, PlacedSecret>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, placed] of secrets) out[name] = placeholderOf(name, placed.entry.value);
  return out;
}
