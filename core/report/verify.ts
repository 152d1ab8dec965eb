/**
 * Checking a report against the identity chain anyone with the fleet repo can follow:
 * node.yaml on main names the token key → the token key vouched for the node key →
 * the node key signed status.json. A report of an earlier generation is `revoked`; when
 * node.yaml still lists that generation's token key (`previous`), its chain is checked too,
 * so a history of earlier generations stays verifiable and a lost store can be recovered
 * from it. Used by `mesh-cli status`, `mesh-cli signers` and enrolment; lives beside the
 * code that makes reports so that the two never disagree about the bytes.
 */
import type { NodeIdentity } from '../../schema/fleet.js';
import { loadYaml, type Loaded } from '../load.js';
import { Report } from '../../schema/report.js';
import { verifyClaims, type Verdict, type VouchMemo } from './claims.js';

export type { ReportClaims, SignatureVerdict, Verdict, VouchMemo } from './claims.js';

export interface VerifiedReport extends Verdict {
  /** The parsed report, when status.json could be read at all (even if its signature is bad). */
  report?: Report;
}

/** Verify `statusText` and its signature for `node`, given the node's identity on main (null if it has none). */
export function verifyReport(node: string, statusText: string | null, sigText: string | null, identity: NodeIdentity | null, memo?: VouchMemo): VerifiedReport {
  if (statusText === null) return { signature: 'missing', reason: 'no status.json on the report branch' };
  const parsed = parseReport(node, statusText);
  if (!parsed.ok) return { signature: 'invalid', reason: `status.json does not parse: ${parsed.problems[0]?.message}` };
  return { ...verifyClaims(node, statusText, sigText, parsed.value, identity, memo), report: parsed.value };
}

/**
 * What a reader puts in place of a report file it would not read whole (over its cap): the text
 * starts with a NUL, which no report can, and says why; parseReport refuses it with that reason.
 */
export function oversizedText(file: string, size: number, limit: number): string {
  return `${OVERSIZED}${file} is ${size} bytes, over the ${limit} bytes read of a report: not read`;
}
const OVERSIZED = '\0oversized: ';

/** status.json as JSON checked by the schema; the YAML loader (slow, with line and column) only to say what is wrong. */
export function parseReport(node: string, text: string): Loaded<Report> {
  if (text.startsWith(OVERSIZED)) return { ok: false, problems: [{ file: `reports/${node}:status.json`, line: 1, col: 1, message: text.slice(OVERSIZED.length) }] };
  try {
    const fast = Report.safeParse(JSON.parse(text));
    if (fast.success) return { ok: true, value: fast.data };
  } catch {
    // not JSON: the loader below says where
  }
  return loadYaml(text, `reports/${node}:status.json`, Report);
}

