/**
 * A host assembled from its root: config, node key, store and fleet repo. Only the
 * command entry points call `openHost`; everything below them receives these objects.
 * Opening a host takes the root's lock (one host process per root, see lock.ts) and starts
 * a new pass: its context carries new per-pass caches and the host's own package name.
 */
import type { KeyObject } from 'node:crypto';
import { MeshError } from '../core/errors.js';
import { readConfig, readCredential, readNodeKey, type HostConfig } from './config.js';
import { openFleetRepo, type FleetRepo } from './fleet/git.js';
import { fleetHttp, type ServerClock } from './fleet/http.js';
import { acquireLock } from './lock.js';
import type { Logger } from './log.js';
import { hostPaths, type HostPaths } from './paths.js';
import { passContext, type HostContext, type ResourceContext } from './resources/handler.js';
import { openStore, type Store } from './store/store.js';

export interface Host {
  paths: HostPaths;
  config: HostConfig;
  key: KeyObject;
  store: Store;
  repo: FleetRepo;
  /** This machine's clock against the fleet server's, from its last answer (null before one). */
  clock: () => ServerClock | null;
  ctx: ResourceContext;
  log: Logger;
}

/** Open the enrolled host at `host.root` for one pass; a machine that has not enrolled gets an error saying how to enrol. */
export async function openHost(host: HostContext, log: Logger): Promise<Host> {
  const paths = hostPaths(host.root);
  const config = readConfig(paths);
  if (!config) {
    throw new MeshError('E_NOT_ENROLLED', `this machine (root ${paths.root}) is not enrolled: run 'mesh-host enrol --token-file FILE' with a token from 'mesh-cli token issue NODE'`, {
      next: 'human',
    });
  }
  acquireLock(paths);
  const ctx = passContext(host, config.hostPackage ?? 'mesh-host');
  const store = openStore(paths.store, ctx.faults);
  if (ctx.debug) store.debug = ctx.debug;
  const http = fleetHttp({ credential: readCredential(paths), pin: config.tlsPin });
  const repo = await openFleetRepo(paths.gitdir, config.url, http, { ...(config.pushUrl ? { pushUrl: config.pushUrl } : {}), ...(config.mirrors?.length ? { mirrors: config.mirrors } : {}) });
  return { paths, config, key: readNodeKey(paths), store, repo, clock: () => http.clock(), ctx, log };
}
