/**
 * `mesh-host enrol --token-file F`: become a node. The token is checked against the fleet
 * before anything else (unexpired, of the generation node.yaml on main names, never used:
 * the node's report branch holds no report of its generation). Then the host creates the
 * node key, has the token vouch for it, recovers a lost store from the last report, and
 * pushes the enrolment report — profile, inventory and briefing — before any declaration
 * is applied. Only then does it write its config and delete the token file; a failed push
 * leaves the token file in place so that enrolment can simply be run again. The token's signer
 * keys become the host's trusted set, and the anchor it must never go back from is kept, or
 * recovered from the last report (trust/enrol.ts). It holds the root's lock throughout, from
 * just after the token file is read: an enrolment refused because another mesh-host is working
 * on the root has changed nothing and used nothing, so the same token works once that host is done.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import type { HttpClient } from 'isomorphic-git';
import type { Resource } from '../../schema/declaration.js';
import { NodeIdentity } from '../../schema/fleet.js';
import { loadYamlOrThrow } from '../../core/load.js';
import { VOUCH_NAMESPACE, vouchPayload, type BriefingLine } from '../../schema/report.js';
import { TokenFile } from '../../schema/token.js';
import { tokenCheck } from '../../core/token-check.js';
import { briefingOutcome, clockLine, ineligibleErrors, packageManagerLine, recoverStore, rootWritableLine, type LastReport } from '../briefing.js';
import { readConfig, readNodeKey, writeConfig, writeCredential, writeNodeKey, type HostConfig } from '../config.js';
import { loadDeclaration, nodeDir } from '../../core/declaration/load.js';
import { findNode } from '../../core/fleet/layout.js';
import type { Facts } from '../../schema/facts.js';
import { collectFacts } from '../facts.js';
import { MeshError } from '../../core/errors.js';
import { fleetHttp } from '../fleet/http.js';
import { openFleetRepo, type FleetRepo } from '../fleet/git.js';
import { collectInventory } from '../inventory.js';
import { checkTokenSigners, enrolmentRefused, enrolmentTrust, shardUnreachable, tokenRefused } from '../trust/enrol.js';
import { acquireLock } from '../lock.js';
import { hostPaths, type HostPaths } from '../paths.js';
import { collectProfile } from '../profile.js';
import { buildReport, recordReport, sendReports, sha256 } from '../report.js';
import type { HostContext } from '../resources/handler.js';
import { decodePrivateKey, generateKeyPair, publicKeyOf, sameKey, signSsh, sshPublicKey } from '../../core/sign/sshsig.js';
import { openStore, type Store } from '../store/store.js';
import { writeTrust } from '../trust/state.js';
import { reportRef, SIGNATURE_FILE, STATUS_FILE } from '../../core/report/branch.js';
import { newIdentity, writeIdentity } from '../secrets/host.js';

export interface EnrolResult {
  node: string;
  generation: number;
  nodeKey: string;
  url: string;
  report: string;
  outcome: 'enrolled' | 'ineligible';
  briefing: BriefingLine[];
}

/** Enrol the machine at `ctx.root` with the token in `tokenFile`. */
export async function enrol(tokenFile: string, ctx: HostContext): Promise<EnrolResult> {
  // The token is read first (a file of the operator's, not host state): a bad one is refused without touching the root.
  const token = readToken(tokenFile, ctx.now());
  const paths = hostPaths(ctx.root);
  const release = acquireLock(paths);
  try {
    return await enrolLocked(token, tokenFile, paths, ctx);
  } finally {
    release();
  }
}

async function enrolLocked(token: TokenFile, tokenFile: string, paths: HostPaths, ctx: HostContext): Promise<EnrolResult> {
  const existing = readConfig(paths);
  if (existing?.node === token.node && existing.generation >= token.generation) {
    throw new MeshError('E_TOKEN_USED', `this machine is already enrolled as ${existing.node} generation ${existing.generation}; the token (generation ${token.generation}) cannot be used again. Issue a new token to re-enrol`);
  }
  const http = fleetHttp({ credential: token.credential, pin: token.tlsPin });
  const { main, identity, declared } = await readMain(paths.gitdir + '.enrol', http, token, ctx.now(), collectFacts(paths.root)).catch((e: unknown) => {
    throw tokenRefused(e, token) ?? e;
  });
  // Reports go to the node's shard when mesh.yaml shards them (the token names it), and so does the read of the last one.
  const repo = await openFleetRepo(paths.gitdir, token.url, http, token.reports ? { pushUrl: token.reports } : {});
  const last = await lastReport(repo, token.node, token.generation).catch((e: unknown) => {
    throw tokenRefused(e, token) ?? shardUnreachable(e, token) ?? e; // a report shard that has not been given main yet does not know the credential
  });

  const tokenKey = decodePrivateKey(token.secret);
  const nodeKeys = generateKeyPair();
  const nodeKey = sshPublicKey(nodeKeys.publicKey, `${token.node}@mesh`);
  const store = openStore(paths.store, ctx.faults);
  const briefing = [
    { check: 'token unexpired', ok: true, detail: `generation ${token.generation}, expires ${identity.token!.expires}, not used before` },
    { check: 'fleet reachable', ok: true, detail: `${token.url} (${token.mainBranch} at ${main})` },
    await clockLine(http, token.url, ctx.now),
    packageManagerLine(paths.root),
    rootWritableLine(paths.root),
    recoverStore(store, token.node, last, identity, heldNodeKey(paths)),
  ];
  const failed = briefing.filter((l) => !l.ok);
  const config: HostConfig = {
    format: 1,
    node: token.node,
    generation: token.generation,
    url: token.url,
    ...(token.mirrors?.length ? { mirrors: token.mirrors } : {}),
    ...(token.reports ? { pushUrl: token.reports } : {}),
    mainBranch: token.mainBranch,
    nodeKey,
    tokenKey: sshPublicKey(publicKeyOf(tokenKey)),
    vouch: signSsh(vouchPayload(token.node, token.generation, nodeKey), tokenKey, VOUCH_NAMESPACE),
    signers: token.signers,
    ...(token.tlsPin ? { tlsPin: token.tlsPin } : {}),
    enrolledAt: ctx.now().toISOString(),
    ineligible: failed,
  };

  continueChain(store, last);
  const trust = enrolmentTrust(paths, token, last, identity, store);
  const inventory = collectInventory(paths.root, declared);
  const outcome = briefingOutcome(briefing);
  const body = { kind: 'enrolment' as const, commit: main, digest: null, outcome, errors: ineligibleErrors(failed), resources: [], trust: trust.mode, lastApplied: trust.anchor?.commit ?? null, facts: collectFacts(paths.root), profile: collectProfile(paths.root), inventory, briefing };
  const age = await newIdentity(); // a new identity at every enrolment: secrets encrypted to the old one wait for 'mesh-cli secret rekey'
  const oid = await recordReport(repo, store, buildReport(config, store, body, ctx.now(), age.recipient), nodeKeys.privateKey);
  await sendReports(repo, store, token.node).catch((e: unknown) => {
    throw enrolmentRefused(e, token) ?? tokenRefused(e, token) ?? e;
  });

  writeNodeKey(paths, nodeKeys.privateKey);
  writeIdentity(paths, age, ctx.now());
  if (token.credential) writeCredential(paths, token.credential);
  writeTrust(paths, trust);
  writeConfig(paths, config);
  rmSync(tokenFile, { force: true });
  return { node: token.node, generation: token.generation, nodeKey, url: token.url, report: oid, outcome, briefing };
}

/** The public line of the node key this machine holds from an earlier enrolment, or null when it holds none (or none that reads). */
function heldNodeKey(paths: HostPaths): string | null {
  try {
    return sshPublicKey(publicKeyOf(readNodeKey(paths)));
  } catch {
    return null;
  }
}

function readToken(tokenFile: string, now: Date): TokenFile {
  if (!existsSync(tokenFile)) throw new MeshError('E_NO_TOKEN', `token file ${tokenFile} does not exist: issue one with 'mesh-cli token issue NODE' and copy it here`);
  const again = "copy the file 'mesh-cli token issue' wrote again, whole and unchanged, or issue a new token";
  const token = loadYamlOrThrow(readFileSync(tokenFile, 'utf8'), tokenFile, TokenFile, `the token file ${tokenFile}`, again);
  if (token.check !== undefined && token.check !== tokenCheck(token)) {
    throw new MeshError('E_TOKEN_DAMAGED', `the token file ${tokenFile} was cut short or changed on its way here (its check ${token.check} does not match what it holds): nothing was used; ${again}`);
  }
  if (Date.parse(token.expires) <= now.getTime()) throw expired(token.node, token.expires);
  return token;
}

/**
 * Read node.yaml and the declaration on main through a scratch git dir, removed afterwards: the
 * host's own repository gets main at its first reconcile, so that a host that never reconciled
 * has no "last fetched declaration" to fall back on while disconnected.
 */
async function readMain(gitdir: string, http: HttpClient, token: TokenFile, now: Date, facts: Facts): Promise<{ main: string; identity: NodeIdentity; declared: Resource[] }> {
  rmSync(gitdir, { recursive: true, force: true });
  try {
    const repo = await openFleetRepo(gitdir, token.url, http);
    const main = await repo.fetch(token.mainBranch);
    await checkTokenSigners(token, gitdir, (c) => repo.tree(c), main, now);
    const place = await findNode(repo.tree(main), token.node);
    const identity = await currentIdentity(repo, main, token, now, place?.dir ?? nodeDir(token.node));
    const loaded = await loadDeclaration(repo.tree(main), token.node, { facts, ...(place ? { place } : {}) });
    return { main, identity, declared: loaded.ok ? loaded.declaration.resources : [] };
  } finally {
    rmSync(gitdir, { recursive: true, force: true });
  }
}

/** node.yaml on main must name exactly this token: its generation, its key, an expiry still ahead. */
async function currentIdentity(repo: FleetRepo, main: string, token: TokenFile, now: Date, dir: string): Promise<NodeIdentity> {
  const file = `${dir}/node.yaml`;
  const text = await repo.tree(main).read(file);
  const issue = `issue a new one with 'mesh-cli token issue ${token.node}'`;
  if (text === null) throw new MeshError('E_TOKEN_NOT_PUSHED', `${file} is not on ${token.mainBranch} (${main.slice(0, 12)}): push the commit that issued the token (git push in the fleet checkout) and enrol again`);
  const identity = loadYamlOrThrow(text, file, NodeIdentity);
  if (identity.generation > token.generation) {
    throw new MeshError('E_TOKEN_OLD', `this token is for generation ${token.generation} of ${token.node}, but ${file} on ${token.mainBranch} is at generation ${identity.generation}: a newer token was issued (or the node revoked) since, which revoked this one; use the newest token or ${issue}`);
  }
  if (identity.generation < token.generation) {
    throw new MeshError('E_TOKEN_NOT_PUSHED', `${file} on ${token.mainBranch} is still at generation ${identity.generation}, the token is for generation ${token.generation}: push the commit that issued the token (git push in the fleet checkout) and enrol again`);
  }
  if (!identity.token || !sameKey(identity.token.publicKey, sshPublicKey(publicKeyOf(decodePrivateKey(token.secret))))) {
    throw new MeshError('E_TOKEN_UNKNOWN', `this token's key is not the one ${file} names for generation ${identity.generation} (was a token issued twice from different checkouts?): ${issue}`);
  }
  if (identity.retired) throw new MeshError('E_NODE_RETIRED', `${token.node} is retired on ${token.mainBranch}: ${issue} to bring it back`);
  if (Date.parse(identity.token.expires) <= now.getTime()) throw expired(token.node, identity.token.expires);
  return identity;
}

/** The node's last report on the server (adopted as the local report branch), refusing a token that was already used. */
async function lastReport(repo: FleetRepo, node: string, generation: number): Promise<LastReport | null> {
  const tip = await repo.adopt(reportRef(node));
  if (!tip) return null;
  const tree = repo.tree(tip);
  const last = { status: await tree.read(STATUS_FILE), sig: await tree.read(SIGNATURE_FILE) };
  const claims = looseFields(last.status);
  if (typeof claims.generation === 'number' && claims.generation >= generation) {
    throw new MeshError('E_TOKEN_USED', `this token (generation ${generation}) was already used: reports/${node} holds report #${claims.sequence} of generation ${claims.generation}, made at ${claims.observedAt}. A token enrols one machine once; issue a new one with 'mesh-cli token issue ${node}'`);
  }
  return last;
}

/**
 * Continue the node's report history from the server's tip (an earlier generation, a lost store,
 * or an enrolment whose push failed), as the local report branch now does, instead of forking it.
 */
function continueChain(store: Store, last: LastReport | null): void {
  const sequence = looseFields(last?.status ?? null).sequence;
  if (last?.status && typeof sequence === 'number') store.data.report = { ...store.data.report, sequence, hash: sha256(last.status) };
}

function looseFields(text: string | null): { generation?: unknown; sequence?: unknown; observedAt?: unknown } {
  try {
    return text ? (JSON.parse(text) as object) : {};
  } catch {
    return {};
  }
}

function expired(node: string, expires: string): MeshError {
  return new MeshError('E_TOKEN_EXPIRED', `the token for ${node} expired at ${expires}: issue a new one with 'mesh-cli token issue ${node}'`);
}
