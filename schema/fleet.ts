/** mesh.yaml (fleet settings) and nodes/<node>/node.yaml (a node's identity, written by mesh-cli). */
import * as z from 'zod';
import { NODE_NAME } from './node-name.js';
import { ed25519Blob } from './signing.js';

const sshKey = z
  .string()
  .regex(/^ssh-ed25519 [A-Za-z0-9+/=]+( .*)?$/, { message: 'must be an OpenSSH ed25519 public key ("ssh-ed25519 AAAA...")', abort: true })
  .refine((line) => ed25519Blob(line) !== null, { message: 'is not a whole ed25519 key: its base64 does not decode to one (garbled or cut short): copy the whole line of the .pub file again' });

export { NODE_NAME };
export const NodeName = z.string().regex(NODE_NAME, { message: 'node names are lower-case letters, digits and -, at most 63 characters' });

/** What hosts fetch from and push to (the fleet, its mirrors, the report shards): the host speaks git's smart HTTP only. */
export const HTTP_URL = /^https?:\/\/[^\s/]+/i;
export const HttpUrl = z.string().regex(HTTP_URL, { message: "must be an http:// or https:// URL: hosts speak git's smart HTTP only, not ssh or a path" });

export const MeshConfig = z.strictObject({
  name: z.string().min(1),
  mainBranch: z.string().min(1).default('main'),
  /** `signed` (default): hosts apply only commits signed by `signers`; `none`: for trying mesh out. */
  trust: z.enum(['signed', 'none']).default('signed'),
  signers: z.array(z.strictObject({ name: z.string().min(1), key: sshKey })).default([]),
  packages: z.strictObject({ url: z.string().url() }).optional(),
  /**
   * Where the report branches live when one repository is not enough: `shards`, the URLs of K
   * repositories (each holding a copy of main, kept by `mesh-cli mirror sync`). A node's branch is
   * in the shard core/report/shard.ts picks by its name; without `reports`, in the fleet repository.
   */
  reports: z
    .strictObject({
      shards: z.array(HttpUrl).min(1).refine((urls) => new Set(urls).size === urls.length, { message: 'each shard is listed once: a URL named twice would take nodes from both places' }),
    })
    .optional(),
  host: z
    .strictObject({
      interval: z.string().regex(/^\d+(ms|s|m|h)$/).optional(),
      heartbeat: z.string().regex(/^\d+(ms|s|m|h)$/).optional(),
    })
    .optional(),
  /** Whoever may read every secret (`mesh-cli secret show`, `rekey`): each operator's age recipient. */
  operators: z
    .strictObject({
      recipients: z.array(z.strictObject({ name: z.string().min(1), recipient: z.string().regex(/^age1[02-9ac-hj-np-z]{58}$/, { message: 'must be an age X25519 recipient ("age1…")' }) })).default([]),
    })
    .optional(),
});

export const NodeIdentity = z.strictObject({
  node: NodeName,
  /** Bumped by every token issue and revoke; reports of an earlier generation are revoked. */
  generation: z.number().int().nonnegative(),
  token: z
    .strictObject({
      publicKey: sshKey,
      issuedAt: z.iso.datetime(),
      expires: z.iso.datetime(),
    })
    .optional(),
  /** Token keys of earlier generations, so that their reports stay verifiable as revoked (and recoverable). */
  previous: z.array(z.strictObject({ generation: z.number().int().nonnegative(), publicKey: sshKey })).optional(),
  /** Set by `mesh-cli retire`: the declaration is empty and the host removes everything it owns. */
  retired: z.boolean().optional(),
  /**
   * The node's git credential, never itself: its sha256 (hex), which `mesh-cli serve` checks, and its
   * SHA-256-crypt (`$5$…`, crypt(3)'s format), which a web server's password file can hold (docs/servers.md).
   */
  credential: z.strictObject({
    sha256: z.string().regex(/^[0-9a-f]{64}$/, { message: 'must be 64 lower-case hex digits' }),
    crypt: z.string().regex(/^\$5\$rounds=\d+\$[./0-9A-Za-z]{1,16}\$[./0-9A-Za-z]{43}$/, { message: "must be a SHA-256-crypt hash ('$5$rounds=…$salt$hash')" }).optional(),
  }).optional(),
});

export type MeshConfig = z.infer<typeof MeshConfig>;
export type NodeIdentity = z.infer<typeof NodeIdentity>;
