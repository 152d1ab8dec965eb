/**
 * `mesh-host self-test`: the smoke run a host makes of a newly installed binary before it
 * exits for restart. It walks the real start path — config, store, node key, the current
 * declaration — and prints its version; any failure exits non-zero with the reason.
 */
import { readConfig, readNodeKey, type HostConfig } from '../config.js';
import { loadDeclaration } from '../../core/declaration/load.js';
import { openFleetRepo } from '../fleet/git.js';
import { fleetHttp } from '../fleet/http.js';
import { hostPaths } from '../paths.js';
import { openStore } from '../store/store.js';
import { HOST_VERSION } from '../../core/version.js';
import { collectFacts } from '../facts.js';

export interface SelfTest {
  version: string;
  checks: Array<{ check: string; ok: boolean; detail: string }>;
}

/** Run every check; never throws (a failed check is a line with ok: false). */
export async function selfTest(root: string): Promise<SelfTest> {
  const paths = hostPaths(root);
  const checks: SelfTest['checks'] = [];
  const check = async (name: string, fn: () => Promise<string> | string) => {
    try {
      checks.push({ check: name, ok: true, detail: await fn() });
    } catch (e) {
      checks.push({ check: name, ok: false, detail: e instanceof Error ? e.message : String(e) });
    }
  };
  let config: HostConfig | null = null;
  await check('config', () => {
    config = readConfig(paths);
    return config ? `node ${config.node} generation ${config.generation}` : 'not enrolled (hosted)';
  });
  await check('store', () => `${openStore(paths.store).data.owned.length} owned resources`);
  if (config !== null) {
    const { url, mainBranch, node } = config as HostConfig;
    await check('node key', () => (readNodeKey(paths), 'readable'));
    await check('declaration', async () => {
      const repo = await openFleetRepo(paths.gitdir, url, fleetHttp());
      const commit = await repo.fetched(mainBranch);
      if (!commit) return 'nothing fetched yet';
      const loaded = await loadDeclaration(repo.tree(commit), node, { facts: collectFacts(paths.root) });
      return loaded.ok ? `${loaded.declaration.resources.length} resources at ${commit.slice(0, 12)}` : `invalid at ${commit.slice(0, 12)} (reported by the reconcile pass)`;
    });
  }
  return { version: HOST_VERSION, checks };
}
