/**
 * The report: status.json on refs/heads/reports/<node>, signed by the node key
 * (status.json.sig, OpenSSH signature, namespace "mesh-report"). The node key is vouched
 * for by the token key named in node.yaml, so anyone with main can check the chain.
 */
import * as z from 'zod';
import { ReportedFacts } from './facts.js';
import { NodeName } from './fleet.js';

export { REPORT_NAMESPACE, VOUCH_NAMESPACE, vouchPayload } from './signing.js';

export const ResourceResult = z.object({
  id: z.string(),
  /**
   * unchanged: read back and in sync; created/updated/removed/restored: changed and read back; unverified: some part
   * could not be checked here (`error` says what; it is a change only when it has `changes`); released: no longer owned and left as it is (what was there before mesh is not known);
   * dropped: no longer declared, and never applied (its change had failed or was cut off): no change.
   */
  result: z.enum(['unchanged', 'created', 'updated', 'removed', 'restored', 'released', 'failed', 'unverified', 'skipped', 'dropped']),
  drift: z.boolean().optional(),
  changes: z.array(z.string()).optional(),
  error: z.string().optional(),
  /** A command that ran: its exit status (absent when it was killed or could not start). */
  exit: z.number().int().optional(),
  /** A command that ran: the tail of its output, stdout and stderr as they came (the last 20 lines, at most 2 KB). */
  output: z.string().optional(),
});

export const OwnedRecord = z.object({
  id: z.string(),
  type: z.string(),
  /** The resource as declared when it was last verified. */
  resource: z.record(z.string(), z.unknown()),
  /** What was there before the host took it over, so un-declaring restores it. */
  prior: z.record(z.string(), z.unknown()).nullable(),
  /** intent: recorded before a change that may or may not have happened; verified: read back. */
  state: z.enum(['intent', 'verified']),
  at: z.string(),
});

/** A key that signs main, as the host identified it: its fingerprint ("SHA256:...") and its name in mesh.yaml. */
export const Signer = z.object({ fingerprint: z.string(), name: z.string().nullable() });

/** One check made at enrolment; the briefing's outcome is computed from these, never set by hand. */
export const BriefingLine = z.object({ check: z.string(), ok: z.boolean(), detail: z.string() });

/** What kind of machine this is (loose: a newer host may say more). */
export const Profile = z.looseObject({
  os: z.string(),
  osVersion: z.string(),
  osName: z.string(),
  /** os-release VERSION_CODENAME and the first word of ID_LIKE (or ID): absent from an older host's profile. */
  osCodename: z.string().optional(),
  osFamily: z.string().optional(),
  arch: z.string(),
  kernel: z.string(),
  cpus: z.number().int(),
  memoryBytes: z.number().int(),
  packageManager: z.string(),
  initSystem: z.string(),
  hostVersion: z.string(),
});

/** What is already on the machine that a declaration could touch (loose: a newer host may say more). */
export const Inventory = z.looseObject({
  /** Installed packages and their versions, from the dpkg status file. */
  packages: z.record(z.string(), z.string()),
  /** Units enabled through the systemd wants folders under /etc/systemd/system. */
  services: z.array(z.string()),
  /** Paths the node's current declaration names that already exist, with what they are. */
  declaredPaths: z.array(z.object({ id: z.string(), kind: z.string() })),
});

/**
 * A newer host may say more: a reader reads the fields it knows and passes over the others (the
 * report is signed whole, so they are still the node's word); its facts, profile and inventory
 * are kept whole. A change that a reader must understand is a new `format`.
 */
export const Report = z.object({
  format: z.literal(1),
  node: NodeName,
  generation: z.number().int().nonnegative(),
  nodeKey: z.string(),
  /** Token-key signature over vouchPayload(node, generation, nodeKey). */
  vouch: z.string(),
  hostVersion: z.string(),
  sequence: z.number().int().nonnegative(),
  /** sha256 of the previous report's status.json, or null for the first. */
  previous: z.string().nullable(),
  observedAt: z.iso.datetime(),
  kind: z.enum(['enrolment', 'reconcile', 'heartbeat']),
  commit: z.string().nullable(),
  digest: z.string().nullable(),
  /**
   * applied: every resource converged and was read back; unverified: every resource converged, but some check could not
   * be made here (its lines say which and why): never counted as applied; untrusted: `commit` (main's tip) was refused
   * (unsigned, signed by an untrusted key, or not descending from `lastApplied`).
   */
  outcome: z.enum(['enrolled', 'applied', 'unverified', 'failed', 'ineligible', 'retired', 'untrusted']),
  errors: z.array(z.object({ code: z.string(), message: z.string(), file: z.string().optional(), line: z.number().optional(), col: z.number().optional() })).default([]),
  resources: z.array(ResourceResult).default([]),
  counts: z.object({ changed: z.number(), drift: z.number(), failed: z.number(), unchanged: z.number() }).optional(),
  owned: z.array(OwnedRecord).default([]),
  /** The key that signed `commit`, verified by the host against its trusted keys; null when unsigned or not trusted. */
  signer: Signer.nullable().optional(),
  /** `signed`: the host checked `commit`'s signature; `none`: the fleet switched the check off (mesh.yaml `trust: none`). */
  trust: z.enum(['signed', 'none']).optional(),
  /** The last commit this host accepted and reconciled: the anchor main must descend from, and its recovery copy. */
  lastApplied: z.string().nullable().optional(),
  /** The node's age recipient: secrets for this node are encrypted to it (the newest verified report's is the current one). */
  recipient: z.string().optional(),
  /** The facts this pass rendered its declaration with (plan and status --commit render with them). */
  facts: ReportedFacts.optional(),
  profile: Profile.optional(),
  inventory: Inventory.optional(),
  briefing: z.array(BriefingLine).optional(),
});

export type Report = z.infer<typeof Report>;
/**
 * What `mesh-cli status` keeps of a report in its index (mesh-cli/report-index.ts) and shows:
 * everything but the vouch, the owned list, the inventory and the profile, and only the
 * resources that failed or could not be checked. The whole report stays on the node's report branch.
 */
export type ReportView = Omit<Report, 'vouch' | 'owned' | 'inventory' | 'profile'>;
export type ResourceResult = z.infer<typeof ResourceResult>;
export type OwnedRecord = z.infer<typeof OwnedRecord>;
export type BriefingLine = z.infer<typeof BriefingLine>;
export type Signer = z.infer<typeof Signer>;
export type Profile = z.infer<typeof Profile>;
export type Inventory = z.infer<typeof Inventory>;
