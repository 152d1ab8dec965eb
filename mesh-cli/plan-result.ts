/**
 * What `mesh-cli plan` computes (commands/plan.ts) and shows (plan-format.ts): the plan of
 * each affected node next to its last report. The JSON of `plan --format json` is this shape.
 */
import type { TrustReview } from './trust-review.js';
import type { Problem } from '../core/errors.js';
import type { SignatureVerdict } from '../core/report/verify.js';
import type { Report } from '../schema/report.js';
import type { ResourceChange, Trigger } from './declaration-diff.js';

/** What a node's last report says, next to its planned changes. */
export interface LastReport {
  outcome: Report['outcome'] | null;
  lastContact: string | null;
  commit: string | null;
  signature: SignatureVerdict;
  eligible: boolean | null;
  /** Why the node is ineligible or its report does not count. */
  reason?: string;
}

/** The plan for one affected node. */
export interface NodePlan {
  node: string;
  /** Changed files that feed this node's declaration (its own files and the roles it includes). */
  because: string[];
  changes: ResourceChange[];
  reordered: boolean;
  /** Commands that would run and services that would restart because of the changes; absent when none. */
  triggers?: Trigger[];
  /** The head declaration is invalid: the host would apply nothing and report these. */
  problems?: Problem[];
  /** Resources that read a fact of a node that has not reported its facts yet: planned with placeholder facts, so their content here is not what the node will get. */
  cannotPlan?: string[];
  last: LastReport;
}

/** The whole plan (the JSON of `plan --format json`). */
export interface PlanResult {
  base: string;
  head: string;
  /** What the range does to trust (mesh.yaml's trust and signers, commits the hosts would refuse): shown first. */
  trust?: TrustReview;
  nodes: NodePlan[];
  summary: string;
  notes: string[];
}
