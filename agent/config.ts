/**
 * The host's config (<root>/etc/mesh-host/config.json), written at enrolment, and its node
 * key (node.key, mode 0600). Without a config the machine is hosted, not enrolled. The
 * briefing's failed lines are kept here: they make the node ineligible until it re-enrols.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { KeyObject } from 'node:crypto';
import * as z from 'zod';
import { MeshError, messageOf } from '../core/errors.js';
import { loadYamlOrThrow } from '../core/load.js';
import { BriefingLine } from '../schema/report.js';
import { writeFileAtomic } from './atomic.js';
import type { HostPaths } from './paths.js';
import { decodePrivateKey, encodePrivateKey } from '../core/sign/sshsig.js';

export const HostConfig = z.strictObject({
  format: z.literal(1),
  node: z.string(),
  generation: z.number().int().nonnegative(),
  /** Where the host polls and fetches main (and pushes its reports, unless `pushUrl` says otherwise). Nothing in the git cache overrides it. */
  url: z.string(),
  /** Where reports are pushed instead of `url`: the node's report shard (from the token, when mesh.yaml shards reports), or set by hand when `url` is read-only. */
  pushUrl: z.string().optional(),
  /** Read mirrors of `url` (from the token): main is polled and fetched from the first that answers, then from `url`. */
  mirrors: z.array(z.string()).optional(),
  /** For an https fleet: the SHA-256 of the server's certificate, from the token (the host trusts exactly that certificate). */
  tlsPin: z.string().optional(),
  mainBranch: z.string(),
  nodeKey: z.string(),
  tokenKey: z.string(),
  vouch: z.string(),
  signers: z.array(z.string()),
  enrolledAt: z.string(),
  /** The briefing lines that failed at enrolment; any makes the node ineligible (it applies only an empty declaration). */
  ineligible: z.array(BriefingLine).default([]),
  /** The host's own Debian package, which it smoke-tests and restarts into when a pass installs it (default mesh-host; see upgrade/upgrade.ts). */
  hostPackage: z.string().optional(),
});
export type HostConfig = z.infer<typeof HostConfig>;

/** What to do about a broken file that only enrolment writes. */
const WRITTEN_AT_ENROLMENT = "mesh-host wrote it at enrolment and does not change it since: restore it from a backup, or move it away and enrol again ('mesh-cli token issue NODE', then 'mesh-host enrol --token-file F'). Until then this machine applies nothing and keeps what it has";

/** The config, or null when this machine has not enrolled. A config that exists but is broken is an error. */
export function readConfig(paths: HostPaths): HostConfig | null {
  if (!existsSync(paths.config)) return null;
  return loadYamlOrThrow(readFileSync(paths.config, 'utf8'), paths.config, HostConfig, `the host config ${paths.config}`, WRITTEN_AT_ENROLMENT);
}

/** Write the config (at enrolment). */
export function writeConfig(paths: HostPaths, config: HostConfig): void {
  writeFileAtomic(paths.config, JSON.stringify(config, null, 2) + '\n', 0o644);
}

/** The node's private key; a key that is missing or does not read is a person's to mend (E_NODE_KEY), and says how. */
export function readNodeKey(paths: HostPaths): KeyObject {
  let text: string;
  try {
    text = readFileSync(paths.nodeKey, 'utf8');
  } catch (e) {
    throw new MeshError('E_NODE_KEY', `the node key ${paths.nodeKey} cannot be read (${(e as NodeJS.ErrnoException).code ?? messageOf(e)}): ${WRITTEN_AT_ENROLMENT}`, { next: 'human' });
  }
  try {
    return decodePrivateKey(text);
  } catch (e) {
    throw new MeshError('E_NODE_KEY', `the node key ${paths.nodeKey} is not one mesh-host wrote (${messageOf(e)}): ${WRITTEN_AT_ENROLMENT}`, { next: 'human' });
  }
}

/** Write the node's private key (mode 0600). */
export function writeNodeKey(paths: HostPaths, key: KeyObject): void {
  writeFileAtomic(paths.nodeKey, encodePrivateKey(key), 0o600);
}

export const Credential = z.strictObject({ username: z.string(), password: z.string() });

/** The node's git credential, if the token carried one (mode 0600). */
export function readCredential(paths: HostPaths): z.infer<typeof Credential> | undefined {
  if (!existsSync(paths.credential)) return undefined;
  return loadYamlOrThrow(readFileSync(paths.credential, 'utf8'), paths.credential, Credential, `the node's git credential ${paths.credential}`, WRITTEN_AT_ENROLMENT);
}

/** Write the node's git credential (mode 0600). */
export function writeCredential(paths: HostPaths, credential: z.infer<typeof Credential>): void {
  writeFileAtomic(paths.credential, JSON.stringify(credential) + '\n', 0o600);
}
