/**
 * The host's config (<root>/etc/mesh-host/config.json), written at enrolment, and its node
 * key (node.key, mode 0600). Without a config the machine is hosted, not enrolled.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { KeyObject } from 'node:crypto';
import * as z from 'zod';
import { loadYamlOrThrow } from '../schema/load.js';
import { writeFileAtomic } from './atomic.js';
import type { HostPaths } from './paths.js';
import { decodePrivateKey, encodePrivateKey } from './sign/sshsig.js';

export const HostConfig = z.strictObject({
  format: z.literal(1),
  node: z.string(),
  generation: z.number().int().nonnegative(),
  url: z.string(),
  mainBranch: z.string(),
  nodeKey: z.string(),
  tokenKey: z.string(),
  vouch: z.string(),
  signers: z.array(z.string()),
  enrolledAt: z.string(),
});
export type HostConfig = z.infer<typeof HostConfig>;

/** The config, or null when this machine has not enrolled. A config that exists but is broken is an error. */
export function readConfig(paths: HostPaths): HostConfig | null {
  if (!existsSync(paths.config)) return null;
  return loadYamlOrThrow(readFileSync(paths.config, 'utf8'), paths.config, HostConfig, `the host config ${paths.config}`);
}

export function writeConfig(paths: HostPaths, config: HostConfig): void {
  writeFileAtomic(paths.config, JSON.stringify(config, null, 2) + '\n', 0o644);
}

export function readNodeKey(paths: HostPaths): KeyObject {
  return decodePrivateKey(readFileSync(paths.nodeKey, 'utf8'));
}

export function writeNodeKey(paths: HostPaths, key: KeyObject): void {
  writeFileAtomic(paths.nodeKey, encodePrivateKey(key), 0o600);
}

export const Credential = z.strictObject({ username: z.string(), password: z.string() });

/** The node's git credential, if the token carried one (mode 0600). */
export function readCredential(paths: HostPaths): z.infer<typeof Credential> | undefined {
  if (!existsSync(paths.credential)) return undefined;
  return loadYamlOrThrow(readFileSync(paths.credential, 'utf8'), paths.credential, Credential);
}

export function writeCredential(paths: HostPaths, credential: z.infer<typeof Credential>): void {
  writeFileAtomic(paths.credential, JSON.stringify(credential) + '\n', 0o600);
}
