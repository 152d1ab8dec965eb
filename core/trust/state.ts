/**
 * What a party that checks main trusts (a host's trust.json, the server's record of the last
 * trusted main): the keys that may sign main, whether the fleet checks signatures at all, and
 * the anchor — the last commit accepted, which every later tip must descend from. Only the
 * shape lives here; where it is kept is the keeper's business (agent/trust/state.ts,
 * mesh-cli/server/trusted-main.ts).
 */
import * as z from 'zod';
import { Signer } from '../../schema/report.js';

export const TrustedKey = z.strictObject({ name: z.string().nullable(), key: z.string() });
export type TrustedKey = z.infer<typeof TrustedKey>;

export const TrustState = z.strictObject({
  format: z.literal(1),
  mode: z.enum(['signed', 'none']),
  signers: z.array(TrustedKey),
  /** The last commit accepted, and who signed it (null: unsigned, under `trust: none`). */
  anchor: z.strictObject({ commit: z.string(), signer: Signer.nullable(), at: z.string() }).nullable(),
});
export type TrustState = z.infer<typeof TrustState>;

/** "ssh-ed25519 AAAA... [name]" lines (a token's `signers`) as trusted keys. */
export function keysOfLines(lines: string[]): TrustedKey[] {
  return lines.map((line) => {
    const [type, b64, ...name] = line.trim().split(/\s+/);
    return { key: `${type} ${b64}`, name: name.length > 0 ? name.join(' ') : null };
  });
}
