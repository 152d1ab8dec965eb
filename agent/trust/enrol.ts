/**
 * Trust at enrolment: the host starts trusting the keys the token carries (the operator's word,
 * carried by hand), and keeps its anchor — the last commit it accepted — across re-enrolment.
 * When the state folder was lost with the store, the anchor comes back from the recovery copy
 * in the node's last report, so deleting the host's state does not open the door to a rollback.
 * The token's keys are checked against the first main the host will trust before anything is
 * used: a key changed on the way (one byte is enough) would otherwise make the machine refuse
 * every commit, forever. And a push the server refuses at enrolment is most likely a token it
 * has seen enrol a machine already (mesh-cli/server/hooks.ts), which the message says.
 */
import { existsSync } from 'node:fs';
import type { TreeReader } from '../../core/declaration/declaration.js';
import { fingerprint } from '../../core/sign/sshsig.js';
import { checkTip, fleetTrust } from '../../core/trust/check.js';
import { readCommitBytes } from '../ancestry.js';
import type { NodeIdentity } from '../../schema/fleet.js';
import type { TokenFile } from '../../schema/token.js';
import type { LastReport } from '../briefing.js';
import { MeshError } from '../../core/errors.js';
import type { HostPaths } from '../paths.js';
import type { Store } from '../store/store.js';
import { keysOfLines, type TrustState } from '../../core/trust/state.js';
import { readTrust, trustPath } from './state.js';
import { verifyReport } from '../../core/report/verify.js';

/** The trust state to write at enrolment (recovering the store's last applied commit too, when the store is new). */
export function enrolmentTrust(paths: HostPaths, token: TokenFile, last: LastReport | null, identity: NodeIdentity, store: Store): TrustState {
  const kept = existingAnchor(paths);
  const verified = last ? verifyReport(token.node, last.status, last.sig, identity) : null;
  const report = verified?.chained ? verified.report : undefined;
  const recovered = report?.lastApplied ? { commit: report.lastApplied, signer: null, at: report.observedAt } : null;
  if (store.fresh && !store.data.lastApplied && report?.lastApplied) {
    store.data.lastApplied = { commit: report.lastApplied, digest: report.commit === report.lastApplied ? (report.digest ?? '') : '', at: report.observedAt };
  }
  return { format: 1, mode: token.trust, signers: keysOfLines(token.signers), anchor: kept ?? recovered };
}

function existingAnchor(paths: HostPaths): TrustState['anchor'] {
  if (!existsSync(trustPath(paths))) return null;
  try {
    return readTrust(paths, () => ({ format: 1, mode: 'signed', signers: [], anchor: null })).anchor;
  } catch {
    return null; // unreadable: the report's copy takes its place
  }
}

/** What an HTTP 401 during enrolment means, as an error that says what to do; null for any other error. */
export function tokenRefused(e: unknown, token: TokenFile): MeshError | null {
  const status = (e as { cause?: { data?: { statusCode?: unknown } } } | null)?.cause?.data?.statusCode;
  if (!(e instanceof MeshError) || status !== 401) return null;
  return new MeshError(
    'E_TOKEN_REFUSED',
    `the fleet server refused this token's git credential (${token.node} generation ${token.generation}, HTTP 401): push the commit that issued the token (git push in the fleet checkout)${token.reports ? `, sync main to this node's report shard ${token.reports} (mesh-cli mirror sync)` : ''} and enrol again. ` +
      `If it was pushed, a newer token was issued (or the node revoked) since, which revoked this one: use the newest token or issue a new one with 'mesh-cli token issue ${token.node}'`,
    { next: 'human', cause: e },
  );
}

/** A report shard the token names that does not answer before anything is written: what to do, for the operator at the machine. */
export function shardUnreachable(e: unknown, token: TokenFile): MeshError | null {
  if (!(e instanceof MeshError) || e.code !== 'E_FLEET_UNREACHABLE' || !token.reports) return null;
  return new MeshError(
    'E_FLEET_UNREACHABLE',
    `${e.message}. Nothing was applied or recorded, and the token was not used: enrol again once this node's report shard (named in the token, from mesh.yaml's reports.shards) answers; the token is valid until ${token.expires}`,
    { next: 'retry', cause: e },
  );
}

/**
 * Refuse a token whose signer keys do not let the host trust main's tip as enrolment found it
 * (the first main it would trust): the message names the keys on both sides.
 */
export async function checkTokenSigners(token: TokenFile, gitdir: string, tree: (commit: string) => TreeReader, main: string, now: Date): Promise<void> {
  if (token.trust === 'none') return;
  const src = { readCommit: (oid: string) => readCommitBytes(gitdir, oid), tree, descends: async () => 'unknown' as const };
  const verdict = await checkTip(src, { format: 1, mode: 'signed', signers: keysOfLines(token.signers), anchor: null }, main, now);
  if (verdict.ok) return;
  const named = (await fleetTrust(tree(main)).catch(() => null))?.signers ?? [];
  const prints = (keys: Array<{ key: string }>) => keys.map((k) => printOf(k.key)).join(', ') || 'none';
  throw new MeshError(
    'E_TOKEN_SIGNERS',
    `this token's signer keys do not match the fleet: ${token.mainBranch}'s tip ${main.slice(0, 12)} ${verdict.message.replace(/^main's tip \S+ is not applied: /, '')}. ` +
      `mesh.yaml there trusts ${prints(named)}; the token carries ${prints(keysOfLines(token.signers))}. ` +
      `The token file was changed on its way here, or main's tip is not signed by a key the token trusts: nothing was used; issue a new token with 'mesh-cli token issue ${token.node}' (and check that main's tip is signed)`,
    { next: 'human' },
  );
}

/** What a refused push of the enrolment report means, as an error that says what to do; null for any other error. */
export function enrolmentRefused(e: unknown, token: TokenFile): MeshError | null {
  // The server answered and refused the ref (isomorphic-git's GitPushError): not a network fault.
  const refused = e instanceof MeshError && (e.code === 'E_PUSH_REJECTED' || (e.cause as { code?: unknown } | undefined)?.code === 'GitPushError');
  if (!refused) return null;
  return new MeshError(
    'E_TOKEN_USED',
    `the fleet server refused the enrolment report of ${token.node} (${e.message}): the token of ${token.node} generation ${token.generation} was already used to enrol a machine (the server keeps that record where the report branch cannot undo it), or the report broke a limit of the server (its log says which). ` +
      `A token enrols one machine once: issue a new one with 'mesh-cli token issue ${token.node}'`,
    { next: 'human', cause: e },
  );
}

function printOf(key: string): string {
  try {
    return fingerprint(key);
  } catch {
    return `an unreadable key (${key.slice(0, 24)}…)`;
  }
}
