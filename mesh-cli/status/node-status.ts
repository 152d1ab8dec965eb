/**
 * One node's row of `mesh-cli status` (commands/status.ts makes it, commands/html.ts draws it):
 * its own file, so that neither command imports the other.
 */
import type { SignatureVerdict } from '../../core/report/verify.js';
import type { Report, Signer } from '../../schema/report.js';
import type { ChainVerdict } from '../chain.js';

/** One row of `status --json`: the node's last report, trusted only when its signature is valid. */
export interface NodeStatus {
  node: string;
  lastContact: string | null;
  commit: string | null;
  outcome: Report['outcome'] | null;
  hostVersion: string | null;
  signature: SignatureVerdict;
  generation: number | null;
  sequence: number | null;
  /** false when the last valid report says the node may not be given resources; null without one. */
  eligible: boolean | null;
  /** Resources the last pass found changed on the machine and put back (drift), when there were any. */
  drift?: number;
  reason?: string;
  errors?: string[];
  /** An `unverified` pass: each check that could not be made ("service:nginx: restart requested but no running systemd"). */
  unchecked?: string[];
  /** An `untrusted` pass: the commit the node still enforces (`commit` is the one it refused). */
  lastApplied?: string | null;
  /** The URL of the node's report shard, when that did not answer and no earlier run saw a report of it. */
  away?: string;
  /** What a report whose signature is not valid claims; never shown as the node's state. */
  claimed?: { lastContact: string; commit: string | null; outcome: Report['outcome'] };
  /** The node's report chain: ok, or replayed / reordered / forked (chain.ts). */
  chain: ChainVerdict;
  /** Who signed the commit the last valid report names, as the host verified it (null: unsigned, refused or unchecked). */
  signer: Signer | null;
  /** Whether the host checks commit signatures: its last report's word, else mesh.yaml's on main. */
  trust: 'signed' | 'none';
}
