/**
 * `mesh-cli mirror sync URL...`: make each read mirror's main the fleet server's main. Hosts
 * enrolled with `token issue --mirror URL` poll and fetch main from their first mirror that
 * answers and push their reports to the fleet server, so a mirror holds main only. A mirror is as
 * untrusted as any server: hosts check main's signatures whatever served it; a mirror that falls
 * behind only delays its hosts. Run it after each push of main (from CI, or a post-receive hook
 * on the fleet server: docs/scale.md).
 *
 * Without URLs it syncs the report shards mesh.yaml names (`reports.shards`): each holds a copy of
 * main, from which the server there reads the node credentials, so a new token works on a shard
 * once main is synced to it; and it moves every report branch that is not on its node's shard
 * (after a shard was added) to that shard. Each shard is reached with the operator credential
 * status uses (status/shards.ts).
 */
import type { Command } from 'commander';
import { MeshError, messageOf } from '../../core/errors.js';
import { openFleet, type Fleet } from '../fleet.js';
import { git, gitSaid } from '../git.js';
import { plainUrl, shardSources, type ShardSource } from '../status/shards.js';
import { shardOf } from '../../core/report/shard.js';
import { REPORT_REFS } from '../../core/report/branch.js';
import { withoutCredentials } from './token.js';

export interface Synced {
  main: string;
  mirrors: Array<{ url: string; ok: boolean; error?: string }>;
  /** Report branches moved to the shard mesh.yaml now names for their node (shards only). */
  moved?: Array<{ node: string; from: string; to: string }>;
  /** Old copies of report branches deleted because the node's shard holds them (shards only). */
  removed?: Array<{ node: string; from: string; heldBy: string }>;
  /** Report branches not on their node's shard that stay where they are, because that shard was not synced (shards only). */
  waiting?: Array<{ node: string; from: string; to: string }>;
}

/** Push origin's main, as fetched now, to each of `urls` (forced: a mirror follows the fleet server); `passing`: every failure was one to try again (a server that did not answer). */
async function syncMirrors(fleet: Fleet, urls: string[]): Promise<{ synced: Synced; passing: boolean }> {
  const branch = fleet.config.mainBranch;
  await git(fleet.dir, ['fetch', '--quiet', 'origin', `+refs/heads/${branch}:refs/remotes/origin/${branch}`]);
  const main = (await git(fleet.dir, ['rev-parse', `refs/remotes/origin/${branch}`])).trim();
  const mirrors: Synced['mirrors'] = [];
  let passing = true;
  for (const url of urls) {
    try {
      await git(fleet.dir, ['push', '--quiet', '--force', '--no-verify', url, `refs/remotes/origin/${branch}:refs/heads/${branch}`]);
      mirrors.push({ url: withoutCredentials(url), ok: true });
    } catch (e) {
      passing &&= e instanceof MeshError && e.next === 'retry';
      mirrors.push({ url: withoutCredentials(url), ok: false, error: withoutCredentials(gitSaid(String((e as MeshError).data?.stderr ?? messageOf(e)))) });
    }
  }
  return { synced: { main, mirrors }, passing };
}

/**
 * Each report branch that is not on the shard mesh.yaml now names for its node (a shard was
 * added, or the fleet repository held every branch before the reports were sharded), moved
 * there whole: fetched, pushed to its shard where that has no branch of the node yet, and deleted
 * where it was. Its host, which reads its shard from main, goes on from it. A node whose shard
 * already has a branch keeps that one. The old copy is then deleted when that branch holds it
 * (a move whose delete failed, or a host that pushed its whole history there first, and went on
 * there since): nothing is lost. A copy the shard's branch does not hold stays where it is, and
 * status names it. The shards at the positions in `down` (not synced: they did not answer) are
 * neither read nor written: what belongs on them waits for the next sync, the rest moves.
 */
async function moveStrays(fleet: Fleet, shards: ShardSource[], down: ReadonlySet<number> = new Set()): Promise<Pick<Synced, 'moved' | 'removed' | 'waiting'>> {
  const k = shards.length;
  const origin = { url: withoutCredentials((await git(fleet.dir, ['remote', 'get-url', 'origin'])).trim()), remote: 'origin' };
  // The fleet repository last, as a place no node's branch belongs; unless mesh.yaml lists it as a shard itself.
  const sources = shards.some((s) => s.url === plainUrl(origin.url)) ? [...shards] : [...shards, origin];
  // Each source's report branches: node → tip.
  const listed = await Promise.all(sources.map(async (s, i) => {
    if (down.has(i)) return new Map<string, string>();
    const out = await git(fleet.dir, ['ls-remote', s.remote, `${REPORT_REFS}*`]);
    return new Map(out.split('\n').filter(Boolean).map((l) => [l.split('\t')[1]!.slice(REPORT_REFS.length), l.split('\t')[0]!] as const));
  }));
  const moved: NonNullable<Synced['moved']> = [];
  const removed: NonNullable<Synced['removed']> = [];
  const waiting: NonNullable<Synced['waiting']> = [];
  for (const [i, branches] of listed.entries()) {
    const away = [...branches.keys()].filter((node) => shardOf(node, k) !== i);
    const astray = away.filter((node) => !down.has(shardOf(node, k)));
    for (const node of away) if (down.has(shardOf(node, k))) waiting.push({ node, from: sources[i]!.url, to: shards[shardOf(node, k)]!.url });
    const strays = astray.filter((node) => !listed[shardOf(node, k)]!.has(node));
    const copies = astray.filter((node) => listed[shardOf(node, k)]!.has(node));
    if (copies.length > 0) removed.push(...(await removeHeldCopies(fleet, copies, sources[i]!, (node) => shards[shardOf(node, k)]!, branches)));
    if (strays.length === 0) continue;
    const temp = (node: string) => `refs/mesh-move/${node}`;
    await git(fleet.dir, ['fetch', '--quiet', '--no-tags', sources[i]!.remote, ...strays.map((node) => `+${REPORT_REFS}${node}:${temp(node)}`)]);
    try {
      for (const [j, target] of shards.entries()) {
        const going = strays.filter((node) => shardOf(node, k) === j);
        if (going.length === 0) continue;
        await git(fleet.dir, ['push', '--quiet', '--no-verify', target.remote, ...going.map((node) => `${temp(node)}:${REPORT_REFS}${node}`)]);
        await git(fleet.dir, ['push', '--quiet', '--no-verify', sources[i]!.remote, ...going.map((node) => `:${REPORT_REFS}${node}`)]);
        moved.push(...going.map((node) => ({ node, from: sources[i]!.url, to: target.url })));
        for (const node of going) listed[j]!.set(node, branches.get(node)!);
      }
    } finally {
      await git(fleet.dir, ['update-ref', '--stdin'], strays.map((node) => `delete ${temp(node)}\n`).join(''));
    }
  }
  return { moved, removed, waiting };
}

/**
 * The old copies on `source` of branches that the node's shard (`shardFor`) also has, deleted
 * where the shard's branch holds the copy's tip (the same commit or a later one). `tips` are the
 * copies' tips as listed: a copy that moved since is not deleted (the push leases that tip).
 */
async function removeHeldCopies(fleet: Fleet, copies: string[], source: ShardSource, shardFor: (node: string) => ShardSource, tips: Map<string, string>): Promise<NonNullable<Synced['removed']>> {
  const temp = (node: string, side: 'copy' | 'shard') => `refs/mesh-${side}/${node}`;
  const held: string[] = [];
  try {
    await git(fleet.dir, ['fetch', '--quiet', '--no-tags', source.remote, ...copies.map((node) => `+${REPORT_REFS}${node}:${temp(node, 'copy')}`)]);
    const byShard = new Map<ShardSource, string[]>();
    for (const node of copies) byShard.set(shardFor(node), [...(byShard.get(shardFor(node)) ?? []), node]);
    for (const [shard, nodes] of byShard) await git(fleet.dir, ['fetch', '--quiet', '--no-tags', shard.remote, ...nodes.map((node) => `+${REPORT_REFS}${node}:${temp(node, 'shard')}`)]);
    for (const node of copies) {
      const holds = await git(fleet.dir, ['merge-base', '--is-ancestor', tips.get(node)!, temp(node, 'shard')]).then(() => true, () => false);
      if (holds) held.push(node);
    }
    if (held.length > 0) await git(fleet.dir, ['push', '--quiet', '--no-verify', ...held.map((node) => `--force-with-lease=${REPORT_REFS}${node}:${tips.get(node)}`), source.remote, ...held.map((node) => `:${REPORT_REFS}${node}`)]);
  } finally {
    await git(fleet.dir, ['update-ref', '--stdin'], copies.flatMap((node) => [`delete ${temp(node, 'copy')}\n`, `delete ${temp(node, 'shard')}\n`]).join(''));
  }
  return held.map((node) => ({ node, from: source.url, heldBy: shardFor(node).url }));
}

export function mirrorCommand(program: Command): void {
  program
    .command('mirror')
    .description('read mirrors of the fleet server')
    .command('sync')
    .description("push the fleet server's main to each read mirror (none named: to each report shard of mesh.yaml)")
    .argument('[url...]', "each mirror's repository URL, with an operator credential of that server where it needs one")
    .option('--json', 'print the result as JSON')
    .action(async (named: string[], o: { json?: boolean }) => {
      const fleet = await openFleet(process.cwd());
      const shards = named.length ? null : await shardSources(fleet);
      const urls = named.length ? named : shards?.map((s) => s.remote);
      if (!urls) throw new MeshError('E_NO_MIRRORS', "name the mirrors to sync (mesh-cli mirror sync URL...), or list the report shards in mesh.yaml's reports.shards", { next: 'human' });
      const { synced, passing } = await syncMirrors(fleet, urls);
      if (shards) Object.assign(synced, await moveStrays(fleet, shards, new Set(synced.mirrors.flatMap((m, i) => (m.ok ? [] : [i])))));
      if (o.json) console.log(JSON.stringify(synced));
      else {
        for (const m of synced.mirrors) console.log(m.ok ? `${m.url}: main at ${synced.main.slice(0, 12)}` : `${m.url}: not synced: ${m.error}`);
        for (const m of synced.moved ?? []) console.log(`reports/${m.node}: moved from ${m.from} to ${m.to}`);
        for (const m of synced.removed ?? []) console.log(`reports/${m.node}: old copy deleted from ${m.from} (${m.heldBy} holds it)`);
        for (const m of synced.waiting ?? []) console.log(`reports/${m.node}: not moved from ${m.from}: its shard ${m.to} was not synced`);
      }
      const failed = synced.mirrors.filter((m) => !m.ok);
      const waiting = synced.waiting?.length ? `, and ${synced.waiting.length} report branch(es) that belong on them stay where they are (named above)` : '';
      if (failed.length > 0) throw new MeshError('E_MIRROR_SYNC', `${failed.length} of ${synced.mirrors.length} mirror(s) not synced: their hosts keep the last main they had${waiting}, until a sync reaches them; ${passing ? 'run it again when they answer' : 'fix what git said above, and run it again'}`, { next: passing ? 'retry' : 'human' });
    });
}
