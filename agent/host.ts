/**
 * A host assembled from its root: config, node key, store and fleet repo. Only the
 * command entry points call `openHost`; everything below them receives these objects.
 */
import type { KeyObject } from 'node:crypto';
import { MeshError } from './errors.js';
import { readConfig, readCredential, readNodeKey, type HostConfig } from './config.js';
import { fleetHttp } from './fleet/http.js';
import { openFleetRepo, type FleetRepo } from './fleet/git.js';
import type { Logger } from './log.js';
import { hostPaths, type HostPaths } from './paths.js';
import type { ResourceContext } from './resources/handler.js';
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
  const store = Store.open(paths.store);
  const repo = await openFleetRepo(paths.gitdir, config.url, fleetHttp({ credential: readCredential(paths) }));
  return { paths, config, key: readNodeKey(paths), store, repo, ctx, log };
}
