/**
 * The signature half of checking a report (verify.ts is the whole): status.json
 * signed by the node key it names, that key vouched for by the token key node.yaml names for
 * the report's generation. No schema and no YAML here, only the signature code, so that the
 * threads `mesh-cli status` verifies on (mesh-cli/verify-worker.ts) start in milliseconds.
 */
import { hash } from 'node:crypto';
import type { NodeIdentity } from '../../schema/fleet.js';
import { REPORT_NAMESPACE, VOUCH_NAMESPACE, vouchPayload } from '../../schema/signing.js';
import { sameKeyIfWellFormed, verifySsh } from '../sign/sshsig.js';

export type SignatureVerdict = 'valid' | 'invalid' | 'revoked' | 'missing';

/** A verdict on a report's signature and why it is not `valid`. */
export interface Verdict {
  signature: SignatureVerdict;
  /** Why the verdict is not `valid`. */
  reason?: string;
  /** True when the chain up to a token key in node.yaml verified: always for `valid`, for `revoked` when the key is on record. */
  chained?: boolean;
}

/** What a report says about who signed it: the fields its signature and vouch are checked against. */
export interface ReportClaims {
  node: string;
  generation: number;
  nodeKey: string;
  vouch: string;
}

/** The token keys of node.yaml, which is all of it a verdict depends on. */
export type IdentityKeys = Pick<NodeIdentity, 'generation' | 'previous'> & { token?: { publicKey: string } };

/**
 * Vouches already checked, as `vouchKey` strings: a vouch depends only on the node, its
 * generation, its node key, the vouch and the token key, so one check serves every report of
 * that generation (mesh-cli status keeps them between runs).
 */
export type VouchMemo = Set<string>;

/**
 * The signature checks of verifyReport for a status.json that already parsed into `claims`:
 * signed by the node key it names, that key vouched for by the token key node.yaml names for its
 * generation. mesh-cli status parses each report once and hands this part to worker threads,
 * with status.json and its signature as the bytes read out of the pack.
 */
export function verifyClaims(node: string, status: string | Uint8Array, sshsig: string | Uint8Array | null, claims: ReportClaims, identity: IdentityKeys | null, memo?: VouchMemo): Verdict {
  const verdict = (signature: SignatureVerdict, reason?: string, chained?: boolean): Verdict => ({ signature, ...(reason ? { reason } : {}), ...(chained ? { chained } : {}) });
  if (sshsig === null) return verdict('invalid', 'status.json is not signed (no status.json.sig)');
  if (claims.node !== node) return verdict('invalid', `the report on reports/${node} is for node ${claims.node}`);
  const armored = typeof sshsig === 'string' ? sshsig : Buffer.from(sshsig.buffer, sshsig.byteOffset, sshsig.byteLength).toString('utf8');
  const sig = verifySsh(status, armored, REPORT_NAMESPACE);
  if (!sig.ok) return verdict('invalid', `signature does not verify: ${sig.reason}`);
  if (!names(claims.nodeKey, sig.publicKey)) return verdict('invalid', 'signed by a key other than the node key it names');
  if (!identity) return verdict('invalid', `no nodes/${node}/node.yaml on main vouches for this node`);
  if (claims.generation < identity.generation) {
    const revoked = `signed by generation ${claims.generation}; node.yaml is at generation ${identity.generation}`;
    const earlier = identity.previous?.find((p) => p.generation === claims.generation);
    if (!earlier) return verdict('revoked', `${revoked} (node.yaml keeps no token key for generation ${claims.generation}, so its chain cannot be checked)`);
    if (!vouched(claims, earlier.publicKey, memo)) return verdict('invalid', `the node key is not vouched for by generation ${claims.generation}'s token key in node.yaml`);
    return verdict('revoked', revoked, true);
  }
  if (claims.generation > identity.generation || !identity.token) return verdict('invalid', `generation ${claims.generation} is not the one on main (${identity.generation})`);
  if (!vouched(claims, identity.token.publicKey, memo)) return verdict('invalid', 'the node key is not vouched for by the token key in node.yaml');
  return verdict('valid', undefined, true);
}

/**
 * Whether the key line `line` (a report's or node.yaml's, which may say anything) names the key
 * `canonical`, as verifySsh gives it ("ssh-ed25519 BASE64"). The usual line is that text, or it
 * with a comment, and is compared as text; any other is decoded (status does this 10,000 times a run).
 */
function names(line: string, canonical: string): boolean {
  if (typeof line === 'string' && line.startsWith(canonical) && (line.length === canonical.length || line.charCodeAt(canonical.length) === 32)) return true;
  return sameKeyIfWellFormed(line, canonical);
}

/** The memo key of a vouch check. */
export function vouchKey(report: ReportClaims, tokenKey: string): string {
  return hash('sha256', JSON.stringify([report.node, report.generation, report.nodeKey, report.vouch, tokenKey]), 'base64');
}

function vouched(report: ReportClaims, tokenKey: string, memo?: VouchMemo): boolean {
  const key = memo ? vouchKey(report, tokenKey) : '';
  if (memo?.has(key)) return true;
  const vouch = verifySsh(vouchPayload(report.node, report.generation, report.nodeKey), report.vouch, VOUCH_NAMESPACE);
  const ok = vouch.ok && names(tokenKey, vouch.publicKey);
  if (ok) memo?.add(key);
  return ok;
}
