/**
 * `mesh-host enrol --token-file F`: become a node. Creates the node key, has the token
 * vouch for it, pushes the enrolment report (profile and briefing) before any declaration
 * is applied, and only then writes the config and deletes the token file. A failed push
 * leaves the token file in place so that enrolment can simply be run again.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { loadYamlOrThrow } from '../../schema/load.js';
import { VOUCH_NAMESPACE, vouchPayload } from '../../schema/report.js';
import { TokenFile } from '../../schema/token.js';
import { readConfig, writeConfig, writeCredential, writeNodeKey, type HostConfig } from '../config.js';
import { MeshError } from '../errors.js';
import { fleetHttp } from '../fleet/http.js';
import { openFleetRepo } from '../fleet/git.js';
import { hostPaths } from '../paths.js';
import { collectProfile } from '../profile.js';
import { buildReport, recordReport, reportRef, sendReports, sha256 } from '../report.js';
import type { ResourceContext } from '../resources/handler.js';
import { decodePrivateKey, generateKeyPair, publicKeyOf, signSsh, sshPublicKey } from '../sign/sshsig.js';
import { Store } from '../store.js';

export interface EnrolResult {
  node: string;
  generation: number;
  nodeKey: string;
  url: string;
  report: string;
}

/** Enrol the machine at `ctx.root` with the token in `tokenFile`. */
export async function enrol(tokenFile: string, ctx: ResourceContext): Promise<EnrolResult> {
  if (!existsSync(tokenFile)) throw new MeshError('E_NO_TOKEN', `token file ${tokenFile} does not exist: issue one with 'mesh-cli token issue NODE' and copy it here`);
  const token = loadYamlOrThrow(readFileSync(tokenFile, 'utf8'), tokenFile, TokenFile, `the token file ${tokenFile}`);
  const now = ctx.now();
  if (Date.parse(token.expires) <= now.getTime()) {
    throw new MeshError('E_TOKEN_EXPIRED', `the token for ${token.node} expired at ${token.expires}: issue a new one with 'mesh-cli token issue ${token.node}'`);
  }
  const paths = hostPaths(ctx.root);
  const existing = readConfig(paths);
  if (existing && existing.generation >= token.generation) {
    throw new MeshError('E_TOKEN_USED', `this machine is already enrolled as ${existing.node} generation ${existing.generation}; the token (generation ${token.generation}) cannot be used again. Issue a new token to re-enrol`);
  }

  const tokenKey = decodePrivateKey(token.secret);
  const nodeKeys = generateKeyPair();
  const nodeKey = sshPublicKey(nodeKeys.publicKey, `${token.node}@mesh`);
  const config: HostConfig = {
    format: 1,
    node: token.node,
    generation: token.generation,
    url: token.url,
    mainBranch: token.mainBranch,
    nodeKey,
    tokenKey: sshPublicKey(publicKeyOf(tokenKey)),
    vouch: signSsh(vouchPayload(token.node, token.generation, nodeKey), tokenKey, VOUCH_NAMESPACE),
    signers: token.signers,
    enrolledAt: now.toISOString(),
  };

  const store = Store.open(paths.store);
  const repo = await openFleetRepo(paths.gitdir, token.url, fleetHttp({ credential: token.credential }));
  const main = await repo.poll(token.mainBranch);
  await continueChain(repo, store, token.node);
  const briefing = [
    { check: 'token unexpired', ok: true, detail: `expires ${token.expires}` },
    { check: 'fleet reachable', ok: true, detail: `${token.url} (${token.mainBranch} at ${main ?? 'none yet'})` },
  ];
  const report = buildReport(config, store, { kind: 'enrolment', commit: main, digest: null, outcome: 'enrolled', errors: [], resources: [], profile: collectProfile(ctx.root), briefing }, now);
  const oid = await recordReport(repo, store, report, nodeKeys.privateKey);
  await sendReports(repo, store, token.node);

  writeNodeKey(paths, nodeKeys.privateKey);
  if (token.credential) writeCredential(paths, token.credential);
  writeConfig(paths, config);
  rmSync(tokenFile, { force: true });
  return { node: token.node, generation: token.generation, nodeKey, url: token.url, report: oid };
}

/** Continue the node's report history on the server (an earlier generation, or a lost store) instead of forking it. */
async function continueChain(repo: Awaited<ReturnType<typeof openFleetRepo>>, store: Store, node: string): Promise<void> {
  const tip = await repo.adopt(reportRef(node));
  if (!tip) return;
  const text = await repo.tree(tip).read('status.json');
  const last = text ? safeSequence(text) : 0;
  if (store.data.report.sequence < last) {
    store.data.report = { ...store.data.report, sequence: last, hash: text ? sha256(text) : null };
  }
}

function safeSequence(text: string): number {
  try {
    const n = (JSON.parse(text) as { sequence?: unknown }).sequence;
    return typeof n === 'number' && Number.isInteger(n) ? n : 0;
  } catch {
    return 0;
  }
}
