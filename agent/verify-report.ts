/**
 * Checking a report against the identity chain anyone with the fleet repo can follow:
 * node.yaml on main names the token key → the token key vouched for the node key →
 * the node key signed status.json. A report of an earlier generation is `revoked`; when
 * node.yaml still lists that generation's token key (`previous`), its chain is checked too,
 * so a history of earlier generations stays verifiable and a lost store can be recovered
 * from it. Used by `mesh-cli status`, `mesh-cli signers` and enrolment; lives beside the
 * code that makes reports so that the two never disagree about the bytes.
 */
import { createHash } from 'node:crypto';
import type { NodeIdentity } from '../schema/fleet.js';
import { loadYaml, type Loaded } from '../schema/load.js';
import { REPORT_NAMESPACE, Report, VOUCH_NAMESPACE, vouchPayload } from '../schema/report.js';
import { sameKey, verifySsh } from './sign/sshsig.js';

export type SignatureVerdict = 'valid' | 'invalid' | 'revoked' | 'missing';

export interface VerifiedReport {
  signature: SignatureVerdict;
  /** Why the verdict is not `valid`. */
  reason?: string;
  /** The parsed report, when status.json could be read at all (even if its signature is bad). */
  report?: Report;
  /** True when the chain up to a token key in node.yaml verified: always for `valid`, for `revoked` when the key is on record. */
  chained?: boolean;
}

/**
 * Vouches already checked, as `vouchKey` strings: a vouch depends only on the node, its
 * generation, its node key, the vouch and the token key, so one check serves every report of
 * that generation (mesh-cli status keeps them between runs).
 */
export type VouchMemo = Set<string>;

/** Verify `statusText` and its signature for `node`, given the node's identity on main (null if it has none). */
export function verifyReport(node: string, statusText: string | null, sigText: string | null, identity: NodeIdentity | null, memo?: VouchMemo): VerifiedReport {
  if (statusText === null) return { signature: 'missing', reason: 'no status.json on the report branch' };
  const parsed = parseReport(node, statusText);
  if (!parsed.ok) return { signature: 'invalid', reason: `status.json does not parse: ${parsed.problems[0]?.message}` };
  const report = parsed.value;
  const verdict = (signature: SignatureVerdict, reason?: string, chained?: boolean): VerifiedReport => ({ signature, report, ...(reason ? { reason } : {}), ...(chained ? { chained } : {}) });
  if (sigText === null) return verdict('invalid', 'status.json is not signed (no status.json.sig)');
  if (report.node !== node) return verdict('invalid', `the report on reports/${node} is for node ${report.node}`);
  const sig = verifySsh(statusText, sigText, REPORT_NAMESPACE);
  if (!sig.ok) return verdict('invalid', `signature does not verify: ${sig.reason}`);
  if (!same(sig.publicKey, report.nodeKey)) return verdict('invalid', 'signed by a key other than the node key it names');
  if (!identity) return verdict('invalid', `no nodes/${node}/node.yaml on main vouches for this node`);
  if (report.generation < identity.generation) {
    const revoked = `signed by generation ${report.generation}; node.yaml is at generation ${identity.generation}`;
    const earlier = identity.previous?.find((p) => p.generation === report.generation);
    if (!earlier) return verdict('revoked', `${revoked} (node.yaml keeps no token key for generation ${report.generation}, so its chain cannot be checked)`);
    if (!vouched(report, earlier.publicKey, memo)) return verdict('invalid', `the node key is not vouched for by generation ${report.generation}'s token key in node.yaml`);
    return verdict('revoked', revoked, true);
  }
  if (report.generation > identity.generation || !identity.token) return verdict('invalid', `generation ${report.generation} is not the one on main (${identity.generation})`);
  if (!vouched(report, identity.token.publicKey, memo)) return verdict('invalid', 'the node key is not vouched for by the token key in node.yaml');
  return verdict('valid', undefined, true);
}

/** status.json as JSON checked by the schema; the YAML loader (slow, with line and column) only to say what is wrong. */
function parseReport(node: string, text: string): Loaded<Report> {
  try {
    const fast = Report.safeParse(JSON.parse(text));
    if (fast.success) return { ok: true, value: fast.data };
  } catch {
    // not JSON: the loader below says where
  }
  return loadYaml(text, `reports/${node}:status.json`, Report);
}

/** Whether two key lines name the same key; a malformed line (a report may say anything) names none. */
function same(a: string, b: string): boolean {
  try {
    return sameKey(a, b);
  } catch {
    return false;
  }
}

/** The memo key of a vouch check. */
export function vouchKey(report: Pick<Report, 'node' | 'generation' | 'nodeKey' | 'vouch'>, tokenKey: string): string {
  return createHash('sha256').update(JSON.stringify([report.node, report.generation, report.nodeKey, report.vouch, tokenKey])).digest('base64');
}

function vouched(report: Report, tokenKey: string, memo?: VouchMemo): boolean {
  const key = memo ? vouchKey(report, tokenKey) : '';
  if (memo?.has(key)) return true;
  const vouch = verifySsh(vouchPayload(report.node, report.generation, report.nodeKey), report.vouch, VOUCH_NAMESPACE);
  const ok = vouch.ok && same(vouch.publicKey, tokenKey);
  if (ok) memo?.add(key);
  return ok;
}
