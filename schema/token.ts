/** The token file: printed once by `mesh-cli token issue`, carried by hand, read by `mesh-host enrol`. */
import * as z from 'zod';
import { NodeName } from './fleet.js';

export const TokenFile = z.strictObject({
  kind: z.literal('mesh-token'),
  version: z.literal(1),
  url: z.string().min(1),
  node: NodeName,
  generation: z.number().int().nonnegative(),
  /** The token's private key (PKCS8 PEM). Its public half is in nodes/<node>/node.yaml. */
  secret: z.string().min(1),
  expires: z.iso.datetime(),
  signers: z.array(z.string()).default([]),
  mainBranch: z.string().min(1).default('main'),
  credential: z.strictObject({ username: z.string().min(1), password: z.string().min(1) }).optional(),
});

export type TokenFile = z.infer<typeof TokenFile>;
