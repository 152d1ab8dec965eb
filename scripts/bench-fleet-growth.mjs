// Bench phase 3: how much the report repository grows per node per day at steady state (no
// declaration change, a heartbeat every 15 minutes = 96 a day). One simulated host sends a real
// report and its first heartbeat, then a day of heartbeats, all through the real code and
// pushed to the server; a second host stacks every heartbeat instead, which is what history
// would be without replacement. Sizes are the bare repo's object store after `git gc`.
import { join } from 'node:path';
import { commitFiles, git, nodeNames, progress, repoBytes } from './bench-fleet-lib.mjs';

const HEARTBEATS_PER_DAY = 96;

/** One repository per mode, grown by a day of heartbeats. */
export async function growth(sim, { work, data, server }) {
  const run = async (mode) => {
    const name = `growth-${mode}.git`;
    const bare = join(data, name);
    git(data, ['init', '--quiet', '--bare', '--initial-branch=main', name]); // mesh-cli serve serves every DATA/*.git
    const [node] = nodeNames(1);
    const keys = sim.nodeKeys(node);
    const now = new Date();
    const at = (i) => new Date(now.getTime() + i * 15 * 60_000);
    commitFiles(bare, { 'mesh.yaml': 'name: growth\n', [`nodes/${node}/node.yaml`]: sim.identityYaml(keys, now), [`nodes/${node}/base.yaml`]: sim.declarationYaml(node) }, 'growth');
    const host = await sim.SimHost.open(join(work, mode), `${server.url}${name}`, keys);
    const { body } = await host.contact();
    await host.report(body, now);
    await host.report(body, at(1), { replace: mode === 'replace' }); // steady state starts with one heartbeat on top
    const reachable = () => (git(bare, ['gc', '--quiet', '--prune=now']), repoBytes(bare).bytes);
    const start = reachable();
    for (let i = 2; i <= HEARTBEATS_PER_DAY + 1; i++) await host.report(body, at(i), { replace: mode === 'replace' });
    git(bare, ['gc', '--quiet']); // default gc: unreachable objects stay until gc.pruneExpire (2 weeks)
    const kept = repoBytes(bare);
    const end = reachable();
    const commits = Number(git(bare, ['rev-list', '--count', `refs/heads/reports/${node}`]));
    return { commits, startBytes: start, endBytes: end, growthBytesPerDay: end - start, unreachableBytesPerDay: kept.bytes - end, looseKiBBeforePrune: Number(kept.countObjects.size) };
  };
  progress('phase 3: a day of heartbeats for one node, replacing and stacking');
  const [replace, stack] = await Promise.all([run('replace'), run('stack')]);
  return { heartbeatsPerDay: HEARTBEATS_PER_DAY, replace, stack };
}
