/** The token file: printed once by `mesh-cli token issue`, carried by hand, read by `mesh-host enrol`. */
import * as z from 'zod';
import { HttpUrl, NodeName } from './fleet.js';

export const TokenFile = z.strictObject({
  kind: z.literal('mesh-token'),
  version: z.literal(1),
  /** core/token-check.ts: a check of the other fields, against a file cut short or changed on its way (absent in tokens of mesh before it). */
  check: z.string().regex(/^[0-9a-f]{16}$/, { message: 'must be 16 hex digits, as mesh-cli token issue wrote it' }).optional(),
  url: HttpUrl,
  /** Read mirrors of `url`: hosts poll and fetch main from the first that answers, and push their reports to `url`. */
  mirrors: z.array(HttpUrl).optional(),
  /** Where the host pushes its reports when mesh.yaml shards them: its shard's URL (absent: `url`). */
  reports: HttpUrl.optional(),
  node: NodeName,
  generation: z.number().int().nonnegative(),
  /** The token's private key (PKCS8 PEM). Its public half is in nodes/<node>/node.yaml. */
  secret: z.string().min(1),
  expires: z.iso.datetime(),
  /** The keys trusted to sign main ("ssh-ed25519 AAAA... NAME"), the host's first trusted set. */
  signers: z.array(z.string()).default([]),
  /** mesh.yaml's `trust` when the token was issued: `none` lets the host start without checking signatures. */
  trust: z.enum(['signed', 'none']).default('signed'),
  mainBranch: z.string().min(1).default('main'),
  /** For an https `url`: the SHA-256 of the server's certificate (64 hex digits); the host trusts exactly that certificate, without a CA. */
  tlsPin: z.string().regex(/^[0-9a-f]{64}$/, { message: 'must be the SHA-256 of the certificate, 64 lower-case hex digits' }).optional(),
  /** The node's own git credential for `mesh-cli serve` (its sha256 is in node.yaml). */
  credential: z.strictObject({ username: z.string().min(1), password: z.string().min(1) }).optional(),
});

export type TokenFile = z.infer<typeof TokenFile>;
