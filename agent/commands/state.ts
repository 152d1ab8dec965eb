/** `mesh-host state`: which lifecycle state this machine is in and why, its identity, and what it owns. */
import { existsSync } from 'node:fs';
import { readConfig } from '../config.js';
import { hostPaths } from '../paths.js';
import { Store } from '../store.js';
import { HOST_VERSION } from '../version.js';

export interface HostState {
  state: 'unmanaged' | 'hosted' | 'enrolled' | 'disconnected';
  reason: string;
  hostVersion: string;
  node?: string;
  generation?: number;
  nodeKey?: string;
  url?: string;
  lastApplied: { commit: string; at: string } | null;
  lastContact: { commit: string; at: string } | null;
  unsentReport: boolean;
  owned: Array<{ id: string; state: string; at: string }>;
}

/** Describe the machine at `root`. */
export function describeState(root: string): HostState {
  const paths = hostPaths(root);
  const base = { hostVersion: HOST_VERSION, lastApplied: null, lastContact: null, unsentReport: false, owned: [] };
  if (!existsSync(paths.stateDir) && !existsSync(paths.configDir)) return { ...base, state: 'unmanaged', reason: `no mesh-host state under ${paths.root}` };
  const store = Store.open(paths.store);
  const config = readConfig(paths);
  const owned = store.data.owned.map((r) => ({ id: r.id, state: r.state, at: r.at }));
  const common = { ...base, owned, lastApplied: store.data.lastApplied, lastContact: store.data.lastContact, unsentReport: !store.data.report.pushed };
  if (!config) return { ...common, state: 'hosted', reason: 'mesh-host is installed but not enrolled; it can apply a local bundle' };
  const identity = { node: config.node, generation: config.generation, nodeKey: config.nodeKey, url: config.url };
  const err = store.data.lastError;
  if (err && (!store.data.lastContact || err.at > store.data.lastContact.at)) {
    const since = store.data.lastContact ? `last successful contact at ${store.data.lastContact.at}` : 'no successful contact yet';
    return { ...common, ...identity, state: 'disconnected', reason: `${since}; error at ${err.at}: ${err.message}` };
  }
  return { ...common, ...identity, state: 'enrolled', reason: store.data.lastContact ? `last contact with the fleet at ${store.data.lastContact.at}` : 'enrolled; no reconcile yet' };
}
