/**
 * Report shards (issue 22): mesh.yaml's `reports.shards` names K repositories; `token issue` hands
 * each node the shard a hash of its name picks, the host pushes its reports there, `mesh-cli
 * mirror sync` gives every shard main (whose node.yaml files the server there checks credentials
 * against), and `status` reads each node from its shard only. One real `mesh-cli serve`
 * holding the fleet repository and two shards.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { shardOf } from '../core/report/shard.js';
import type { Synced } from '../mesh-cli/commands/mirror.js';
import { cli, createFleet, git, hostCmd, newMachine, operatorUrl, type TestFleet } from './helpers/fleet.js';

const open: TestFleet[] = [];
afterAll(async () => {
  for (const f of open.splice(0)) await f.close();
});

/** The report-branch pushes in the server's log, as [user, repository]. */
function pushes(fleet: TestFleet): Array<[string, string]> {
  return fleet.server.stderr().split('\n').flatMap((l): Array<[string, string]> => {
    try {
      const o = JSON.parse(l) as { msg?: string; path?: string; user?: string | null; method?: string };
      return o.msg === 'request' && o.method === 'POST' && o.path?.endsWith('/git-receive-pack') && o.user ? [[o.user, o.path.split('/')[1]!]] : [];
    } catch {
      return [];
    }
  });
}

describe('the shard of a node', () => {
  const names = Array.from({ length: 4000 }, (_, i) => `node-${i}`);
  it('spreads nodes evenly, and a shard appended to the list takes nodes only for itself', () => {
    const counts = [0, 0, 0, 0];
    for (const n of names) counts[shardOf(n, 4)]!++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
    const moved = names.filter((n) => shardOf(n, 5) !== shardOf(n, 4));
    expect(moved.every((n) => shardOf(n, 5) === 4)).toBe(true);
    expect(Math.abs(moved.length - 800)).toBeLessThan(150);
    expect(names.every((n) => shardOf(n, 1) === 0)).toBe(true);
    expect(shardOf('web-1', 4)).toBe(shardOf('web-1', 4));
  });
});

describe('report shards', { timeout: 180_000 }, () => {
  it('each host pushes to the shard its name picks, status reads every node from its own shard, and a branch elsewhere is not read', async () => {
    const fleet = await createFleet();
    open.push(fleet);
    const shards = ['fleet-reports-0.git', 'fleet-reports-1.git'];
    for (const s of shards) await git(fleet.server.data, 'init', '--quiet', '--bare', '--initial-branch=main', s);
    // Three nodes over both shards: the first names whose hash picks each shard, then one more.
    // (and, for the shard appended at the end, one that moves to it and one that does not).
    const names = Array.from({ length: 40 }, (_, i) => `web-${i + 1}`);
    const nodes = [names.find((n) => shardOf(n, 2) === 0 && shardOf(n, 3) !== 2)!, names.find((n) => shardOf(n, 2) === 1)!];
    nodes.push(names.find((n) => !nodes.includes(n) && shardOf(n, 3) === 2)!);
    const shardUrl = (n: string) => `${fleet.server.url}${shards[shardOf(n, 2)]}`;

    const meshYaml = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    await fleet.commit({ 'mesh.yaml': `${meshYaml}reports:\n  shards:\n${shards.map((s) => `    - ${fleet.server.url}${s}\n`).join('')}` }, 'reports in two shards');

    // Tokens name each node's shard; they work there once main is synced to it.
    for (const node of nodes) {
      const issued = await cli(fleet.checkout, 'token', 'issue', node, '--out', join(fleet.dir, `${node}.token`));
      expect(issued.code, issued.stderr).toBe(0);
      const token = parse(readFileSync(join(fleet.dir, `${node}.token`), 'utf8')) as { reports?: string; url: string };
      expect(token.reports).toBe(shardUrl(node));
      expect(readFileSync(join(fleet.dir, `${node}.token`), 'utf8')).toContain('mesh-cli mirror sync');
    }
    await git(fleet.checkout, 'push', '--quiet');
    const machine = (node: string) => {
      const root = newMachine(join(fleet.dir, 'machines', node));
      mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
      writeFileSync(join(root, 'var/lib/dpkg/status'), '');
      return root;
    };
    // Before the sync, the shard does not know the credential: enrolment says what to do and changes nothing.
    const early = machine(nodes[0]!);
    const refused = await hostCmd(early, 'enrol', '--token-file', join(fleet.dir, `${nodes[0]}.token`));
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toContain('mesh-cli mirror sync');
    expect(existsSync(join(early, 'etc/mesh-host/config.json'))).toBe(false);

    const synced = await cli(fleet.checkout, 'mirror', 'sync');
    expect(synced.code, synced.stderr).toBe(0);
    for (const s of shards) expect(synced.stdout).toContain(`${fleet.server.url}${s}: main at`);
    expect(synced.stdout).not.toContain(fleet.operator); // the operator credential is never printed

    const roots = new Map<string, string>();
    for (const node of nodes) {
      const root = machine(node);
      const enrolled = await hostCmd(root, 'enrol', '--token-file', join(fleet.dir, `${node}.token`));
      expect(enrolled.code, enrolled.stderr).toBe(0);
      expect(JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8')).pushUrl).toBe(shardUrl(node));
      roots.set(node, root);
    }
    // A declaration needs no sync: hosts read main from the fleet repository.
    const files = Object.fromEntries(nodes.map((n) => [`nodes/${n}/base.yaml`, `resources:\n  - type: file\n    path: /etc/motd\n    content: "${n}\\n"\n`]));
    const commit = await fleet.commit(files, 'motd everywhere');
    for (const [node, root] of roots) {
      const pass = await hostCmd(root, 'run', '--once');
      expect(pass.code, pass.stderr).toBe(0);
      expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe(`${node}\n`);
    }

    // Every report push went to the node's shard; the fleet repository holds no report branch.
    const pushed = pushes(fleet).filter(([user]) => nodes.includes(user));
    for (const node of nodes) expect(pushed.filter(([user]) => user === node).map(([, repo]) => repo)).toEqual(expect.arrayContaining([shards[shardOf(node, 2)]]));
    expect(pushed.every(([user, repo]) => repo === shards[shardOf(user, 2)])).toBe(true);
    expect(await git(join(fleet.server.data, 'fleet.git'), 'for-each-ref', 'refs/heads/reports/')).toBe('');
    for (const [i, s] of shards.entries()) {
      const held = (await git(join(fleet.server.data, s), 'for-each-ref', '--format=%(refname:lstrip=3)', 'refs/heads/reports/')).split('\n').filter(Boolean);
      expect(held.sort()).toEqual(nodes.filter((n) => shardOf(n, 2) === i).sort());
    }

    const status = await cli(fleet.checkout, 'status', '--json');
    expect(status.code, status.stderr).toBe(0);
    const rows = JSON.parse(status.stdout).nodes as Array<{ node: string; commit: string; outcome: string; signature: string; chain: string }>;
    for (const node of nodes) expect(rows.find((r) => r.node === node)).toMatchObject({ commit, outcome: 'applied', signature: 'valid', chain: 'ok' });
    const history = await cli(fleet.checkout, 'status', '--node', nodes[1]!, '--json');
    expect(history.code, history.stderr).toBe(0);
    expect(history.stdout).toContain(commit);

    // A copy of a node's branch on the other shard (pushed by hand) is not read, and status says so.
    const [a] = nodes;
    const other = shards[1 - shardOf(a!, 2)]!;
    const before = rows.find((r) => r.node === a)!;
    const tip = await git(join(fleet.server.data, shards[shardOf(a!, 2)]!), 'rev-parse', `refs/heads/reports/${a}`);
    await git(join(fleet.server.data, shards[shardOf(a!, 2)]!), 'push', '--quiet', operatorUrl(fleet.server, fleet.operator, other), `${tip}:refs/heads/reports/${a}`);
    const again = await cli(fleet.checkout, 'status', '--json');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`${a} on ${fleet.server.url}${other}`);
    expect(again.stderr).toContain('not read');
    expect((JSON.parse(again.stdout).nodes as typeof rows).find((r) => r.node === a)).toMatchObject({ commit: before.commit, outcome: 'applied', signature: 'valid' });
    const otherUrl = operatorUrl(fleet.server, fleet.operator, other);
    await git(fleet.checkout, 'push', '--quiet', otherUrl, `:refs/heads/reports/${a}`);

    // A shard that does not answer: status shows its nodes as the last run saw them, names the
    // shard, and exits 3 (try again later); with the shard back, it reads it again.
    const down = shards[1]!;
    const onDown = nodes.filter((n) => shardOf(n, 2) === 1);
    expect(onDown.length).toBeGreaterThan(0);
    renameSync(join(fleet.server.data, down), join(fleet.server.data, `${down}.away`));
    const page = join(fleet.dir, 'fleet.html');
    const partial = await cli(fleet.checkout, 'status', '--json', '--html', page);
    renameSync(join(fleet.server.data, `${down}.away`), join(fleet.server.data, down));
    expect(partial.code, partial.stderr).toBe(3);
    expect(readFileSync(page, 'utf8')).toContain(`the report shard ${fleet.server.url}${down} did not answer`); // the page says so too
    expect(partial.stderr).toContain(`the report shard ${fleet.server.url}${down} did not answer`);
    expect(partial.stderr).toContain(`its ${onDown.length} node(s) are shown as the last status run saw them`);
    const shown = JSON.parse(partial.stdout) as { nodes: typeof rows; unreachable: unknown };
    expect(shown.unreachable).toEqual([{ url: `${fleet.server.url}${down}`, error: expect.any(String), nodes: onDown.length }]);
    for (const node of nodes) expect(shown.nodes.find((r) => r.node === node)).toMatchObject({ commit, outcome: 'applied', signature: 'valid', chain: 'ok' });
    const whole = await cli(fleet.checkout, 'status', '--json');
    expect(whole.code, whole.stderr).toBe(0);
    expect(JSON.parse(whole.stdout)).not.toHaveProperty('unreachable');
    // A node on the shard that does not answer, whose node.yaml changed on main and whose report
    // text the checkout no longer keeps, cannot be verified again now: it is shown as not verified,
    // with the shard named, and the rest of the fleet as before (exit 3, not a failure as a whole).
    const changed = onDown[0]!;
    const nodeYaml = readFileSync(join(fleet.checkout, 'nodes', changed, 'node.yaml'), 'utf8');
    await fleet.commit({ [`nodes/${changed}/node.yaml`]: `${nodeYaml}# looked at again\n` }, 'node.yaml touched');
    rmSync(join(fleet.checkout, '.git', 'mesh', 'report-texts.bin'), { force: true });
    renameSync(join(fleet.server.data, down), join(fleet.server.data, `${down}.away`));
    const stale = await cli(fleet.checkout, 'status', '--json');
    renameSync(join(fleet.server.data, `${down}.away`), join(fleet.server.data, down));
    expect(stale.code, stale.stderr).toBe(3);
    const staleRows = (JSON.parse(stale.stdout) as { nodes: typeof rows }).nodes;
    expect(JSON.parse(stale.stdout).summary).toMatch(new RegExp(`^${nodes.length} nodes: ${nodes.length - 1} applied, 1 with a report not verified;`));
    expect(staleRows.find((r) => r.node === changed)).toMatchObject({ signature: 'missing', reason: expect.stringContaining(`its report shard ${fleet.server.url}${down} did not answer`) });
    for (const node of nodes.filter((n) => n !== changed)) expect(staleRows.find((r) => r.node === node)).toMatchObject({ commit, signature: 'valid' });
    const back = await cli(fleet.checkout, 'status', '--json');
    expect(back.code, back.stderr).toBe(4); // verified again; no node has applied main's new commit yet
    expect((JSON.parse(back.stdout) as { nodes: typeof rows }).nodes.find((r) => r.node === changed)).toMatchObject({ commit, outcome: 'applied', signature: 'valid' });
    // Other commands that read reports still fail when a shard does not answer (they take no partial view).
    renameSync(join(fleet.server.data, down), join(fleet.server.data, `${down}.away`));
    const rollout = await cli(fleet.checkout, 'status', '--commit', commit, '--json');
    renameSync(join(fleet.server.data, `${down}.away`), join(fleet.server.data, down));
    expect(rollout.code, rollout.stdout).toBe(3);
    // A first status run (a new checkout: no index yet) while a shard does not answer: the nodes on
    // it are not known, which is not "never enrolled", and the row, the summary and the page say so.
    rmSync(join(fleet.checkout, '.git', 'mesh'), { recursive: true, force: true });
    renameSync(join(fleet.server.data, down), join(fleet.server.data, `${down}.away`));
    const fresh = await cli(fleet.checkout, 'status', '--html', page);
    const freshJson = await cli(fleet.checkout, 'status', '--json');
    renameSync(join(fleet.server.data, `${down}.away`), join(fleet.server.data, down));
    expect(fresh.code, fresh.stderr).toBe(3);
    expect(fresh.stdout).not.toContain('never enrolled');
    for (const node of onDown) expect(fresh.stdout).toMatch(new RegExp(`^${node} +unknown +- +unknown: its shard did not answer`, 'm'));
    expect(fresh.stdout).toContain(`${onDown.length} not read (their shard did not answer)`);
    expect(readFileSync(page, 'utf8')).toContain('unknown: its shard did not answer');
    const freshRows = (JSON.parse(freshJson.stdout) as { nodes: Array<{ node: string; away?: string }> }).nodes;
    for (const node of nodes) expect(freshRows.find((r) => r.node === node)?.away).toBe(onDown.includes(node) ? `${fleet.server.url}${down}` : undefined);

    // A shard appended: main names it, mirror sync gives it main and moves there the branches of the nodes it takes, and their hosts go on there.
    const three = [...shards, 'fleet-reports-2.git'];
    await git(fleet.server.data, 'init', '--quiet', '--bare', '--initial-branch=main', three[2]!);
    const grown = await fleet.commit({ 'mesh.yaml': `${meshYaml}reports:\n  shards:\n${three.map((s) => `    - ${fleet.server.url}${s}\n`).join('')}` }, 'a third shard');
    const movers = nodes.filter((n) => shardOf(n, 3) === 2);
    expect(movers.length).toBeGreaterThan(0);
    const resynced = await cli(fleet.checkout, 'mirror', 'sync', '--json');
    expect(resynced.code, resynced.stderr).toBe(0);
    expect((JSON.parse(resynced.stdout) as { moved: Array<{ node: string; to: string }> }).moved).toEqual(
      movers.map((node) => expect.objectContaining({ node, from: `${fleet.server.url}${shards[shardOf(node, 2)]}`, to: `${fleet.server.url}${three[2]}` })));
    for (const [node, root] of roots) {
      const pass = await hostCmd(root, 'run', '--once');
      expect(pass.code, pass.stderr).toBe(0);
      expect(JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8')).pushUrl).toBe(`${fleet.server.url}${three[shardOf(node, 3)]}`);
    }
    for (const [i, s] of three.entries()) {
      const held = (await git(join(fleet.server.data, s), 'for-each-ref', '--format=%(refname:lstrip=3)', 'refs/heads/reports/')).split('\n').filter(Boolean);
      expect(held.sort()).toEqual(nodes.filter((n) => shardOf(n, 3) === i).sort());
    }
    const after = await cli(fleet.checkout, 'status', '--json');
    expect(after.code, after.stderr).toBe(0);
    expect(after.stderr).not.toContain('not read');
    for (const node of nodes) expect((JSON.parse(after.stdout).nodes as typeof rows).find((r) => r.node === node)).toMatchObject({ commit: grown, outcome: 'applied', signature: 'valid', chain: 'ok' });
  });
});

describe('sharding a fleet that runs', { timeout: 120_000 }, () => {
  it('mirror sync moves every report branch from the fleet repository to its shard, and the hosts go on there', async () => {
    const fleet = await createFleet();
    open.push(fleet);
    const root = await fleet.enrol('app-1');
    const declared = await fleet.commit({ 'nodes/app-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "one\\n"\n' }, 'motd');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    const fleetRepo = join(fleet.server.data, 'fleet.git');
    const before = await git(fleetRepo, 'rev-parse', 'refs/heads/reports/app-1');

    await git(fleet.server.data, 'init', '--quiet', '--bare', '--initial-branch=main', 'reports-0.git');
    const meshYaml = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    const sharded = await fleet.commit({ 'mesh.yaml': `${meshYaml}reports:\n  shards:\n    - ${fleet.server.url}reports-0.git\n` }, 'reports in one shard');
    const synced = await cli(fleet.checkout, 'mirror', 'sync', '--json');
    expect(synced.code, synced.stderr).toBe(0);
    expect(JSON.parse(synced.stdout).moved).toEqual([{ node: 'app-1', from: fleet.plainUrl, to: `${fleet.server.url}reports-0.git` }]);
    expect(await git(fleetRepo, 'for-each-ref', 'refs/heads/reports/')).toBe('');
    expect(await git(join(fleet.server.data, 'reports-0.git'), 'rev-parse', 'refs/heads/reports/app-1')).toBe(before);

    const pass = await hostCmd(root, 'run', '--once');
    expect(pass.code, pass.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8')).pushUrl).toBe(`${fleet.server.url}reports-0.git`);
    const status = await cli(fleet.checkout, 'status', '--json');
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).nodes[0]).toMatchObject({ node: 'app-1', commit: sharded, outcome: 'applied', signature: 'valid', chain: 'ok' });
    expect(sharded).not.toBe(declared);

    // The old copy is back (as when the move's delete failed) while the host went on on its shard:
    // the next sync deletes it, since the shard's branch holds it. Nothing else moves.
    const shardTip = await git(join(fleet.server.data, 'reports-0.git'), 'rev-parse', 'refs/heads/reports/app-1');
    expect(shardTip).not.toBe(before);
    await git(fleetRepo, 'update-ref', 'refs/heads/reports/app-1', before);
    const cleaned = await cli(fleet.checkout, 'mirror', 'sync', '--json');
    expect(cleaned.code, cleaned.stderr).toBe(0);
    expect(JSON.parse(cleaned.stdout)).toMatchObject({ moved: [], removed: [{ node: 'app-1', from: fleet.plainUrl, heldBy: `${fleet.server.url}reports-0.git` }] });
    expect(await git(fleetRepo, 'for-each-ref', 'refs/heads/reports/')).toBe('');
    expect(await git(join(fleet.server.data, 'reports-0.git'), 'rev-parse', 'refs/heads/reports/app-1')).toBe(shardTip);
    expect(await git(fleet.checkout, 'for-each-ref', 'refs/mesh-copy/', 'refs/mesh-shard/', 'refs/mesh-move/')).toBe('');

    // A copy the shard's branch does not hold stays where it is, and status names it.
    await git(fleetRepo, 'update-ref', 'refs/heads/reports/app-1', sharded);
    const kept = await cli(fleet.checkout, 'mirror', 'sync');
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout).not.toContain('reports/app-1');
    expect(await git(fleetRepo, 'rev-parse', 'refs/heads/reports/app-1')).toBe(sharded);
    const named = await cli(fleet.checkout, 'status', '--json');
    expect(named.code, named.stderr).toBe(0);
    expect(named.stderr).toContain(`app-1 on ${fleet.plainUrl}`);
    expect(named.stderr).toContain('not read');
    expect(JSON.parse(named.stdout).nodes[0]).toMatchObject({ node: 'app-1', commit: sharded, outcome: 'applied', signature: 'valid' });
  });

  it('with a shard down, mirror sync still moves the branches that belong on the others, and names those that wait', async () => {
    const fleet = await createFleet();
    open.push(fleet);
    const fleetRepo = join(fleet.server.data, 'fleet.git');
    const nodes = Array.from({ length: 8 }, (_, i) => `app-${i + 1}`);
    const main = await git(fleetRepo, 'rev-parse', 'refs/heads/main');
    for (const node of nodes) await git(fleetRepo, 'update-ref', `refs/heads/reports/${node}`, main); // branches as the fleet repository held them before sharding
    const shards = ['reports-0.git', 'reports-1.git'];
    for (const s of shards) await git(fleet.server.data, 'init', '--quiet', '--bare', '--initial-branch=main', s);
    const meshYaml = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    await fleet.commit({ 'mesh.yaml': `${meshYaml}reports:\n  shards:\n${shards.map((s) => `    - ${fleet.server.url}${s}\n`).join('')}` }, 'reports in two shards');
    const [on0, on1] = [nodes.filter((n) => shardOf(n, 2) === 0), nodes.filter((n) => shardOf(n, 2) === 1)];
    expect(on0.length * on1.length).toBeGreaterThan(0);

    // A machine enrolling while its shard does not answer: told so, with nothing used up; it enrols once the shard is back.
    const late = Array.from({ length: 20 }, (_, i) => `db-${i + 1}`).find((n) => shardOf(n, 2) === 1)!;
    const tokenFile = join(fleet.dir, `${late}.token`);
    expect((await cli(fleet.checkout, 'token', 'issue', late, '--out', tokenFile)).code).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    const root = newMachine(join(fleet.dir, 'machines', late));
    mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
    writeFileSync(join(root, 'var/lib/dpkg/status'), ''); // eligible, as fleet.enrol makes it
    renameSync(join(fleet.server.data, shards[1]!), join(fleet.server.data, `${shards[1]}.away`));
    const partial = await cli(fleet.checkout, 'mirror', 'sync', '--json');
    const early = await hostCmd(root, 'enrol', '--token-file', tokenFile);
    renameSync(join(fleet.server.data, `${shards[1]}.away`), join(fleet.server.data, shards[1]!));
    expect(early.code, early.stderr).toBe(3);
    expect(early.stderr).toContain(`cannot poll the report shard at ${fleet.server.url}${shards[1]} (HTTP 404): the server answers, but has no repository at this URL (moved, renamed, or not made yet)`);
    expect(early.stderr).toContain('Nothing was applied or recorded, and the token was not used: enrol again once');
    expect(existsSync(tokenFile)).toBe(true);
    // The shard's repository is gone here (HTTP 404): a person's to fix, so exit 2; a server that does not answer at all gives 3.
    expect(partial.code, partial.stderr).toBe(2);
    expect(partial.stderr).toContain(`1 of 2 mirror(s) not synced: their hosts keep the last main they had, and ${on1.length} report branch(es) that belong on them stay where they are (named above), until a sync reaches them; fix what git said above`);
    const got = JSON.parse(partial.stdout) as Required<Pick<Synced, 'moved' | 'waiting'>>;
    expect(got.moved.map((m) => m.node).sort()).toEqual([...on0].sort());
    expect(got.waiting).toEqual(on1.map((node) => ({ node, from: fleet.plainUrl, to: `${fleet.server.url}${shards[1]}` })));
    const held = async (repo: string) => (await git(repo, 'for-each-ref', '--format=%(refname:lstrip=3)', 'refs/heads/reports/')).split('\n').filter(Boolean).sort();
    expect(await held(fleetRepo)).toEqual([...on1].sort());
    expect(await held(join(fleet.server.data, shards[0]!))).toEqual([...on0].sort());

    const whole = await cli(fleet.checkout, 'mirror', 'sync', '--json');
    expect(whole.code, whole.stderr).toBe(0);
    expect(JSON.parse(whole.stdout)).toMatchObject({ moved: on1.map((node) => ({ node, from: fleet.plainUrl, to: `${fleet.server.url}${shards[1]}` })), waiting: [] });
    expect(await held(fleetRepo)).toEqual([]);
    expect(await held(join(fleet.server.data, shards[1]!))).toEqual([...on1].sort());
    const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
    expect(enrolled.code, enrolled.stderr).toBe(0);
    expect(await held(join(fleet.server.data, shards[1]!))).toEqual([...on1, late].sort());
  });

  it('mirror sync never touches the branches of a shard that is the fleet repository itself', async () => {
    const fleet = await createFleet();
    open.push(fleet);
    const root = await fleet.enrol('app-1');
    await fleet.commit({ 'nodes/app-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "one\\n"\n' }, 'motd');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    const fleetRepo = join(fleet.server.data, 'fleet.git');
    const before = await git(fleetRepo, 'rev-parse', 'refs/heads/reports/app-1');

    // app-1's shard is the fleet repository, listed in mesh.yaml beside one other shard.
    await git(fleet.server.data, 'init', '--quiet', '--bare', '--initial-branch=main', 'reports-1.git');
    const list = shardOf('app-1', 2) === 0 ? ['fleet.git', 'reports-1.git'] : ['reports-1.git', 'fleet.git'];
    const meshYaml = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    await fleet.commit({ 'mesh.yaml': `${meshYaml}reports:\n  shards:\n${list.map((r) => `    - ${fleet.server.url}${r}\n`).join('')}` }, 'the fleet repository as a shard');
    const synced = await cli(fleet.checkout, 'mirror', 'sync', '--json');
    expect(synced.code, synced.stderr).toBe(0);
    expect(JSON.parse(synced.stdout)).toMatchObject({ moved: [], removed: [] });
    expect(await git(fleetRepo, 'rev-parse', 'refs/heads/reports/app-1')).toBe(before);
    const pass = await hostCmd(root, 'run', '--once');
    expect(pass.code, pass.stderr).toBe(0);
    expect(await git(fleetRepo, 'rev-parse', 'refs/heads/reports/app-1~1')).toBe(before); // the host went on there
    const status = await cli(fleet.checkout, 'status', '--json');
    expect(status.code, status.stderr).toBe(0);
    expect(status.stderr).not.toContain('not read');
  });
});
