/**
 * Trust at enrolment: the host starts trusting the keys the token carries (the operator's word,
 * carried by hand), and keeps its anchor — the last commit it accepted — across re-enrolment.
 * When the state folder was lost with the store, the anchor comes back from the recovery copy
 * in the node's last report, so deleting the host's state does not open the door to a rollback.
 */
import { existsSync } from 'node:fs';
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
    `the fleet server refused this token's git credential (${token.node} generation ${token.generation}, HTTP 401): push the commit that issued the token (git push in the fleet checkout) and enrol again. ` +
      `If it was pushed, a newer token was issued (or the node revoked) since, which revoked this one: use the newest token or issue a new one with 'mesh-cli token issue ${token.node}'`,
    { next: 'human', cause: e },
  );
}
