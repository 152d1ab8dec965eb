/**
 * Secrets: `secrets.yaml` at nodes/, in each group folder and in each node folder, the same
 * levels as vars.yaml (the closer level replaces a whole entry, `null` unsets it). Each entry is
 * an armored age block and the recipients it was encrypted to: the nodes at or below its file,
 * as their reports named them, and the fleet's operators (age blocks do not say who can open
 * them, so the list is kept beside the block, as sops keeps it).
 */
import * as z from 'zod';
import { NodeName } from './fleet.js';
import { VAR_NAME } from './vars.js';

/** An age X25519 recipient (the public half of an age identity). */
export const AgeRecipient = z.string().regex(/^age1[02-9ac-hj-np-z]{58}$/, { message: 'must be an age X25519 recipient ("age1" and 58 more letters and digits)' });

export const SecretRecipient = z.union([
  z.strictObject({ node: NodeName, recipient: AgeRecipient }),
  z.strictObject({ operator: z.string().min(1), recipient: AgeRecipient }),
]);

export const SecretEntry = z.strictObject({
  recipients: z.array(SecretRecipient),
  value: z.string().regex(/^-----BEGIN AGE ENCRYPTED FILE-----\r?\n[\s\S]*-----END AGE ENCRYPTED FILE-----\s*$/, { message: 'must be an armored age block (-----BEGIN AGE ENCRYPTED FILE----- …); write it with mesh-cli secret set' }),
});

export const SecretsFile = z.record(
  z.string().regex(VAR_NAME, { message: 'a secret name is letters, digits and _ (not starting with a digit), as templates read it: {{ secrets.NAME }}' }),
  SecretEntry.nullable(),
);

export type SecretRecipient = z.infer<typeof SecretRecipient>;
export type SecretEntry = z.infer<typeof SecretEntry>;
export type SecretsFile = z.infer<typeof SecretsFile>;
