/**
 * The trust stage of a pass (reconcile.ts): the tip that contact found is checked (core/trust/check.ts)
 * before anything reads from it. An accepted tip becomes the anchor; a refused one is reported
 * as `untrusted`, and the host keeps reconciling the last commit it accepted, so drift is still
 * corrected while whoever pushed the refused commit gets nothing from it. Also here: what a
 * refused credential (HTTP 401 from the fleet server) means to the host.
 */
import type { Report, Signer } from '../../schema/report.js';
import { descendsDeepening, readCommitBytes } from '../ancestry.js';
import { MeshError } from '../../core/errors.js';
import { checkTip, type Refusal, type TipSource } from '../../core/trust/check.js';
import { keysOfLines, type TrustState } from '../../core/trust/state.js';
import type { Host } from '../host.js';
import type { ReportBody } from '../report.js';
import { readTrust, writeTrust } from './state.js';

export interface Gate {
  /** The commit to reconcile: the tip when it was accepted, else the last accepted commit (null: none yet). */
  commit: string | null;
  tip: string;
  refusal?: Refusal;
  /** Who signed `commit`. */
  signer: Signer | null;
  mode: TrustState['mode'];
  lastApplied: string | null;
}

/** Check `tip` against the host's trust state, advancing the state when it is accepted (and `advance`: not under --noop). */
export async function trustStage(host: Host, tip: string, advance = true): Promise<Gate> {
  const state = readTrust(host.paths, () => initialTrust(host));
  const verdict = await checkTip(hostSource(host), state, tip, host.ctx.now());
  if (verdict.ok) {
    if (advance && JSON.stringify(verdict.state) !== JSON.stringify(state)) writeTrust(host.paths, verdict.state);
    return { commit: tip, tip, signer: verdict.signer, mode: verdict.state.mode, lastApplied: tip };
  }
  const { ok: _ok, ...refusal } = verdict;
  host.log.warn({ commit: tip, code: refusal.code }, refusal.message);
  const anchor = state.anchor && (await readCommitBytes(host.paths.gitdir, state.anchor.commit)) ? state.anchor : null;
  return { commit: anchor?.commit ?? null, tip, refusal, signer: anchor?.signer ?? null, mode: state.mode, lastApplied: state.anchor?.commit ?? null };
}

/** The host's objects as the checker reads them: its local store, deepened from the fleet when ancestry is unknown. */
function hostSource(host: Host): TipSource {
  const gitdir = host.paths.gitdir;
  const deepen = (depth: number) => host.repo.deepen(host.config.mainBranch, depth);
  return { readCommit: (oid) => readCommitBytes(gitdir, oid), tree: (c) => host.repo.tree(c), descends: (oid, ancestor) => descendsDeepening(gitdir, oid, ancestor, deepen) };
}

/** The trust state of a host that has none on disk: the token's signers, and the store's last applied commit as the anchor. */
function initialTrust(host: Host): TrustState {
  const last = host.store.data.lastApplied;
  return { format: 1, mode: 'signed', signers: keysOfLines(host.config.signers), anchor: last ? { commit: last.commit, signer: null, at: last.at } : null };
}

/** The body of a pass whose tip was refused with no accepted commit to fall back on: nothing applied. */
export function nothingApplied(gate: Gate): ReportBody {
  return { kind: 'reconcile', commit: gate.tip, digest: null, outcome: 'untrusted', errors: [], resources: [] };
}

/** The report body with what the trust stage found: the signer, the trust mode, the anchor, and a refusal as `untrusted`. */
export function sealed(gate: Gate, body: ReportBody): ReportBody {
  const sealedBody = { ...body, signer: gate.signer, trust: gate.mode, lastApplied: gate.lastApplied };
  if (!gate.refusal) return sealedBody;
  const { code, message, signer } = gate.refusal;
  const errors: Report['errors'] = [{ code, message }, ...body.errors];
  return { ...sealedBody, outcome: 'untrusted', commit: gate.tip, signer, errors };
}

/**
 * A MeshError saying the fleet server refused this host's credential (HTTP 401), or null when `e` is
 * something else. `missing`: the path of the credential file when this machine has none, which is
 * then what the server asked for (the file was removed), not a revocation.
 */
export function credentialRefused(e: unknown, node: string, missing?: string): MeshError | null {
  const status = (e as { cause?: { data?: { statusCode?: unknown } } } | null)?.cause?.data?.statusCode;
  if (!(e instanceof MeshError) || status !== 401) return null;
  if (missing !== undefined) {
    return new MeshError(
      'E_NO_CREDENTIAL',
      `the fleet server asks ${node} for its git credential (HTTP 401), and this machine has none: ${missing} is missing. mesh-host wrote it at enrolment from the token: if it was removed, restore it from a backup, or enrol again ('mesh-cli token issue ${node}', then 'mesh-host enrol --token-file F'). Until then this machine applies nothing and keeps what it has`,
      { next: 'human', cause: e },
    );
  }
  return new MeshError(
    'E_CREDENTIAL_REFUSED',
    `the fleet server refused the git credential of ${node} (HTTP 401): its identity was revoked, so it applies and reports nothing more (a newer token was issued, or 'mesh-cli revoke ${node}' was pushed). Re-enrol with a new token ('mesh-cli token issue ${node}'). If neither was done, ${node}'s node.yaml on main may not read, which the server cannot check a credential against: 'mesh-cli validate' names its problem, and once it is fixed the next pass goes on`,
    { next: 'human', cause: e },
  );
}
