/**
 * Checking a report against the identity chain anyone with the fleet repo can follow:
 * node.yaml on main names the token key → the token key vouched for the node key →
 * the node key signed status.json. Used by `mesh-cli status`; lives beside the code that
 * makes reports so that the two never disagree about the bytes.
 */
import type { NodeIdentity } from '../schema/fleet.js';
import { loadYaml } from '../schema/load.js';
import { REPORT_NAMESPACE, Report, VOUCH_NAMESPACE, vouchPayload } from '../schema/report.js';
import { sameKey, verifySsh } from './sign/sshsig.js';

export type SignatureVerdict = 'valid' | 'invalid' | 'revoked' | 'missing';

export interface VerifiedReport {
  signature: SignatureVerdict;
  /** Why the verdict is not `valid`. */
  reason?: string;
  /** The parsed report, when status.json could be read at all (even if its signature is bad). */
  report?: Report;
}

/** Verify `statusText` and its signature for `node`, given the node's identity on main (null if it has none). */
export function verifyReport(node: string, statusText: string | null, sigText: string | null, identity: NodeIdentity | null): VerifiedReport {
  if (statusText === null) return { signature: 'missing', reason: 'no status.json on the report branch' };
  const parsed = loadYaml(statusText, `reports/${node}:status.json`, Report);
  if (!parsed.ok) return { signature: 'invalid', reason: `status.json does not parse: ${parsed.problems[0]?.message}` };
  const report = parsed.value;
  const verdict = (signature: SignatureVerdict, reason?: string): VerifiedReport => ({ signature, report, ...(reason ? { reason } : {}) });
  if (sigText === null) return verdict('invalid', 'status.json is not signed (no status.json.sig)');
  if (report.node !== node) return verdict('invalid', `the report on reports/${node} is for node ${report.node}`);
  const sig = verifySsh(statusText, sigText, REPORT_NAMESPACE);
  if (!sig.ok) return verdict('invalid', `signature does not verify: ${sig.reason}`);
  if (!sameKey(sig.publicKey, report.nodeKey)) return verdict('invalid', 'signed by a key other than the node key it names');
  if (!identity) return verdict('invalid', `no nodes/${node}/node.yaml on main vouches for this node`);
  if (report.generation < identity.generation) return verdict('revoked', `signed by generation ${report.generation}; node.yaml is at generation ${identity.generation}`);
  if (report.generation > identity.generation || !identity.token) return verdict('invalid', `generation ${report.generation} is not the one on main (${identity.generation})`);
  const vouch = verifySsh(vouchPayload(node, report.generation, report.nodeKey), report.vouch, VOUCH_NAMESPACE);
  if (!vouch.ok || !sameKey(vouch.publicKey, identity.token.publicKey)) return verdict('invalid', 'the node key is not vouched for by the token key in node.yaml');
  return verdict('valid');
}
