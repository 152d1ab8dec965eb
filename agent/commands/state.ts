/**
 * `mesh-host state`: which lifecycle state this machine is in and why, its identity, and what
 * it owns. Read from local files only, so it answers on a machine that cannot reach the fleet:
 *
 *   unmanaged → hosted (mesh-host's state exists; it can apply a local bundle)
 *             → enrolled (a config and node key) ⇄ disconnected (the last contact failed)
 */
import { existsSync } from 'node:fs';
import type { BriefingLine } from '../../schema/report.js';
import { readConfig } from '../config.js';
import { hostPaths } from '../paths.js';
import { openStore, type Store } from '../store/store.js';
import { HOST_VERSION } from '../../core/version.js';
import { keptPurged, type PurgedKept } from '../purged.js';
import { collectFacts } from '../facts.js';
import type { Facts } from '../../schema/facts.js';

export interface HostState {
  state: 'unmanaged' | 'hosted' | 'enrolled' | 'disconnected';
  reason: string;
  hostVersion: string;
  node?: string;
  generation?: number;
  nodeKey?: string;
  url?: string;
  /** False when a briefing line failed at enrolment: the node applies only an empty declaration. */
  eligible?: boolean;
  /** The briefing lines that failed, when not eligible. */
  ineligible?: BriefingLine[];
  lastApplied: { commit: string; at: string } | null;
  lastContact: { commit: string; at: string } | null;
  unsentReport: boolean;
  owned: OwnedEntry[];
  /** Actions (commands) a change they watch calls for, not yet run successfully: they run on the next pass. */
  pending: string[];
  /** What `purge: true` directories moved aside and the host still keeps, when anything. */
  purged?: PurgedKept;
  /** The facts templates read on this machine (`facts.*`), as a pass collects them now. */
  facts: Facts;
}

/** An owned resource. An `intent` is a change not yet verified: `error` says it failed (from the last report); without it, the host stopped mid-change. */
export interface OwnedEntry {
  id: string;
  state: string;
  at: string;
  /** Why the last change of this intent failed, as the host's last report gives it. */
  error?: string;
  /** No report can say whether this intent's change failed or the host stopped in it: a host not enrolled (it applies bundles only) makes none. */
  reportless?: true;
}

/** The failed lines of the node's last report, by resource id (last-report.ts); main.ts loads it only when an intent asks for it. */
export type FailedInLastReport = (gitdir: string, node: string) => Promise<Map<string, string>>;

/** Describe the machine at `root`; `lastReport` loads the reader of the last report (git), needed only when there is an intent. */
export async function describeState(root: string, lastReport: () => Promise<FailedInLastReport>): Promise<HostState> {
  const paths = hostPaths(root);
  const base = { hostVersion: HOST_VERSION, lastApplied: null, lastContact: null, unsentReport: false, owned: [], pending: [], facts: collectFacts(root) };
  if (!existsSync(paths.stateDir) && !existsSync(paths.configDir)) return { ...base, state: 'unmanaged', reason: `no mesh-host state under ${paths.root}` };
  const store = openStore(paths.store);
  const config = readConfig(paths);
  const owned = await ownedEntries(store, paths.gitdir, config?.node, lastReport);
  const purged = keptPurged(root);
  const common = { ...base, owned, pending: store.pendingIds(), ...(purged ? { purged } : {}), lastApplied: store.data.lastApplied, lastContact: store.data.lastContact, unsentReport: !store.data.report.pushed };
  if (!config) return { ...common, state: 'hosted', reason: 'mesh-host is installed but not enrolled; it can apply a local bundle (mesh-host apply --bundle DIR)' };
  const eligible = config.ineligible.length === 0;
  const identity = { node: config.node, generation: config.generation, nodeKey: config.nodeKey, url: config.url, eligible, ...(eligible ? {} : { ineligible: config.ineligible }) };
  const why = eligible ? '' : `; ineligible (applies only an empty declaration): ${config.ineligible.map((l) => `${l.check}: ${l.detail}`).join('; ')}`;
  const err = store.data.lastError;
  if (err && (!store.data.lastContact || err.at > store.data.lastContact.at)) {
    const since = store.data.lastContact ? `last successful contact with the fleet at ${store.data.lastContact.at}` : 'no successful contact yet';
    const backlog = common.unsentReport ? '; a report is waiting to be pushed' : '';
    return { ...common, ...identity, state: 'disconnected', reason: `${since}; error at ${err.at}: ${err.message}; reconciling the last fetched declaration${backlog}${why}` };
  }
  if (store.fresh) return { ...common, ...identity, state: 'enrolled', reason: `the store ${paths.store} is missing: the host applies nothing until it re-enrols, which recovers what it owned from its last report` };
  const contact = store.data.lastContact ? `last contact with the fleet at ${store.data.lastContact.at}` : 'enrolled; no reconcile yet';
  return { ...common, ...identity, state: 'enrolled', reason: contact + why };
}

/**
 * The owned set, with the error of each intent that the last report lists as failed: a change
 * that failed leaves its intent in the store (apply.ts), just as a host stopped mid-change does,
 * and only the report tells the two apart. The report is read only when there is an intent.
 */
async function ownedEntries(store: Store, gitdir: string, node: string | undefined, lastReport: () => Promise<FailedInLastReport>): Promise<OwnedEntry[]> {
  const owned: OwnedEntry[] = store.data.owned.map((r) => ({ id: r.id, state: r.state, at: r.at }));
  if (!owned.some((o) => o.state === 'intent')) return owned;
  if (!node) return owned.map((o) => (o.state === 'intent' ? { ...o, reportless: true } : o));
  const failed = await (await lastReport())(gitdir, node);
  return owned.map((o) => {
    const error = o.state === 'intent' ? failed.get(o.id) : undefined;
    return error === undefined ? o : { ...o, error };
  });
}
