/**
 * A host assembled from its root: config, node key, store and fleet repo. Only the
 * command entry points call `openHost`; everything below them receives these objects.
 * Opening a host takes the root's lock (one host process per root, see lock.ts) and starts
 * a new pass for the per-pass caches. The git client is imported here when a host is opened,
 * not at start-up, so that a command that never opens one (`apply --bundle`) need not load it.
 */
import type { KeyObject } from 'node:crypto';
import { MeshError } from '../core/errors.js';
import { readConfig, readCredential, readNodeKey, type HostConfig } from './config.js';
import type { FleetRepo } from './fleet/git.js';
import { acquireLock } from './lock.js';
import type { Logger } from './log.js';
import { hostPaths, type HostPaths } from './paths.js';
import type { ResourceContext } from './resources/handler.js';
import { startPass } from './resources/node.js';
import { Store } from './store.js';

export interface Host {
  paths: HostPaths;
  config: HostConfig;
  key: KeyObject;
  store: Store;
  repo: FleetRepo;
  ctx: ResourceContext;
  log: Logger;
}

/** Open the enrolled host at `ctx.root`; a machine that has not enrolled gets an error saying how to enrol. */
export async function openHost(ctx: ResourceContext, log: Logger): Promise<Host> {
  const paths = hostPaths(ctx.root);
  const config = readConfig(paths);
  if (!config) {
    throw new MeshError('E_NOT_ENROLLED', `this machine (root ${paths.root}) is not enrolled: run 'mesh-host enrol --token-file FILE' with a token from 'mesh-cli token issue NODE'`, {
      next: 'human',
    });
  }
  acquireLock(paths);
  startPass();
  const store = Store.open(paths.store);
  const [{ openFleetRepo }, { fleetHttp }] = await Promise.all([import('./fleet/git.js'), import('./fleet/http.js')]);
  const repo = await openFleetRepo(paths.gitdir, config.url, fleetHttp({ credential: readCredential(paths) }));
  return { paths, config, key: readNodeKey(paths), store, repo, ctx, log };
}
