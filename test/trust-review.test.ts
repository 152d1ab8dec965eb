/**
 * Review shows what a range does to trust, first: a change of mesh.yaml's `trust:` or `signers`,
 * and every commit in the range that the hosts would refuse on its own signature (unsigned, or
 * signed by a key not trusted at its parent), which an operator who signs on top would deploy.
 * `plan` shows it before anything else; `verify-range` refuses such a range unless told to.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, MESH_CLI, signingKey, type TestFleet } from './helpers/fleet.js';
import { shardOf } from '../core/report/shard.js';

describe('trust changes in review', { timeout: 90_000 }, () => {
  let fleet: TestFleet;
  beforeAll(async () => {
    fleet = await createFleet();
  });
  afterAll(async () => fleet?.close());

  it('an unsigned commit under a signed one is listed first by plan, and verify-range refuses the range', async () => {
    const base = (await git(fleet.checkout, 'rev-parse', 'HEAD')).trim();
    writeFileSync(join(fleet.checkout, 'roles/README.md'), 'pulled from somewhere\n');
    await git(fleet.checkout, '-c', 'commit.gpgsign=false', 'commit', '--quiet', '-am', 'an unsigned change');
    writeFileSync(join(fleet.checkout, 'nodes/README.md'), 'signed on top\n');
    await git(fleet.checkout, 'commit', '--quiet', '-am', 'signed on top');
    const plan = await cli(fleet.checkout, 'plan', '--base', base, '--no-fetch');
    const lines = plan.stdout.split('\n');
    expect(lines[0]).toBe('TRUST: 1 commit in this range would be refused by the hosts on their own (signing on top of them deploys them):');
    expect(lines[1]).toMatch(/^ {2}[0-9a-f]{12} "an unsigned change": /);
    const md = await cli(fleet.checkout, 'plan', '--base', base, '--no-fetch', '--format', 'markdown');
    expect(md.stdout.split('\n').slice(0, 4)).toEqual(['## mesh plan', '', '> [!WARNING]', '> **TRUST: 1 commit in this range would be refused by the hosts on their own (signing on top of them deploys them):**']);
    const json = JSON.parse((await cli(fleet.checkout, 'plan', '--base', base, '--no-fetch', '--json')).stdout);
    expect(json.trust).toMatchObject({ changes: [], suspects: [{ subject: 'an unsigned change' }] });
    const refused = await cli(fleet.checkout, 'verify-range', `${base}..HEAD`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('refused: look at the above, then run again with --allow');
    expect((await cli(fleet.checkout, 'verify-range', `${base}..HEAD`, '--allow')).code).toBe(0);
    expect((await cli(fleet.checkout, 'verify-range', 'HEAD..HEAD')).code).toBe(0);
    // The range the wrong way round holds neither commit: it says so, rather than that every commit is signed.
    const backwards = await cli(fleet.checkout, 'verify-range', `HEAD..${base}`);
    expect(backwards.code).toBe(0);
    expect(backwards.stdout).toBe(`HEAD..${base}: trust settings unchanged, and the range holds no commit to check (BASE..HEAD is what HEAD has that BASE has not: is it the wrong way round?)\n`);
    await git(fleet.checkout, 'reset', '--quiet', '--hard', base);
  });

  it('the pre-push hook init commits refuses such a push, and lets it through when told to', async () => {
    expect(await git(fleet.checkout, 'config', '--get', 'core.hooksPath')).toBe('.githooks');
    const bin = join(fleet.dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'mesh-cli'), `#!/bin/sh\nexec node ${MESH_CLI} "$@"\n`, { mode: 0o755 });
    const push = (allow: boolean) => spawnSync('git', ['push', '--quiet', 'origin', 'HEAD:main'], { cwd: fleet.checkout, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, ...(allow ? { MESH_ALLOW_TRUST: '1' } : {}) } });
    const before = (await git(fleet.checkout, 'rev-parse', 'HEAD')).trim();
    writeFileSync(join(fleet.checkout, 'roles/README.md'), 'unsigned\n');
    await git(fleet.checkout, '-c', 'commit.gpgsign=false', 'commit', '--quiet', '-am', 'unsigned, to push');
    const refused = push(false);
    expect(refused.status).not.toBe(0);
    expect(refused.stdout + refused.stderr).toContain('"unsigned, to push": ');
    expect((await git(fleet.checkout, 'ls-remote', 'origin', 'refs/heads/main')).split('\t')[0]).toBe(before);
    expect(push(true).status).toBe(0);
    await git(fleet.checkout, 'revert', '--no-edit', 'HEAD');
    expect(push(false).status).toBe(0); // a signed revert on top of an unsigned commit already on main: nothing new to refuse
  });

  it('a shard list that is not the old one with URLs appended is refused, with the nodes it moves counted; appending passes', async () => {
    const base = (await git(fleet.checkout, 'rev-parse', 'HEAD')).trim();
    const meshYaml = join(fleet.checkout, 'mesh.yaml');
    const original = readFileSync(meshYaml, 'utf8');
    const [a, b, c] = ['https://a.example.org/r.git', 'https://b.example.org/r.git', 'https://c.example.org/r.git'];
    const nodes = Array.from({ length: 12 }, (_, i) => `web-${i + 1}`);
    for (const node of nodes) {
      mkdirSync(join(fleet.checkout, 'nodes/web', node), { recursive: true });
      writeFileSync(join(fleet.checkout, 'nodes/web', node, 'node.yaml'), `generation: 1\n`);
    }
    const commitShards = async (urls: string[] | null, message: string) => {
      writeFileSync(meshYaml, urls ? `${original.trimEnd()}\nreports:\n  shards:\n${urls.map((u) => `    - ${u}\n`).join('')}` : original);
      await git(fleet.checkout, 'add', '-A');
      await git(fleet.checkout, 'commit', '--quiet', '-m', message);
      return (await git(fleet.checkout, 'rev-parse', 'HEAD')).trim();
    };
    const review = (range: string) => cli(fleet.checkout, 'verify-range', range);
    const sharded = await commitShards([a, b], 'two report shards');
    expect((await review(`${base}..HEAD`)).code).toBe(0); // sharding a fleet that runs: the documented way
    await commitShards([a, b, c], 'a third shard, appended');
    const appended = await review(`${sharded}..HEAD`);
    expect([appended.code, appended.stdout.trim()]).toEqual([0, `${sharded}..HEAD: trust settings unchanged, and every commit is signed by a key trusted at its parent`]);

    // Each node's shard at [a, b], by the same pick token issue and status make.
    const onB = nodes.filter((n) => shardOf(n, 2) === 1).length;
    await git(fleet.checkout, 'reset', '--quiet', '--hard', sharded);
    await commitShards([b, a], 'shards reordered');
    const reordered = await review(`${sharded}..HEAD`);
    expect(reordered.code).toBe(1);
    expect(reordered.stdout.split('\n')).toEqual([
      'REPORT SHARDS: mesh.yaml moves report branches in a way mirror sync does not mend (docs/servers.md):',
      '  12 of 12 nodes would report to another shard: the list is not the old one with URLs appended at its end (append new shards; do not reorder or remove)',
      '',
    ]);
    expect(reordered.stderr).toContain('refused: look at the above, then run again with --allow');
    expect((await cli(fleet.checkout, 'verify-range', `${sharded}..HEAD`, '--allow')).code).toBe(0);
    expect((await cli(fleet.checkout, 'plan', '--base', sharded, '--no-fetch')).stdout.split('\n')[0]).toBe('REPORT SHARDS: mesh.yaml moves report branches in a way mirror sync does not mend (docs/servers.md):');
    expect(JSON.parse((await cli(fleet.checkout, 'verify-range', `${sharded}..HEAD`, '--json')).stdout)).toMatchObject({ changes: [], suspects: [], shards: [expect.stringMatching(/^12 of 12 nodes/)] });

    await git(fleet.checkout, 'reset', '--quiet', '--hard', sharded);
    await commitShards([a], 'one shard removed');
    const cut = await review(`${sharded}..HEAD`);
    expect(cut.code).toBe(1);
    expect(cut.stdout.split('\n').slice(1, 3)).toEqual([
      `  shard removed: ${b} holds the report branches of ${onB} node${onB === 1 ? '' : 's'}, and mirror sync moves branches only between the shards listed`,
      `  ${onB} of 12 nodes would report to another shard: the list is not the old one with URLs appended at its end (append new shards; do not reorder or remove)`,
    ]);

    await git(fleet.checkout, 'reset', '--quiet', '--hard', sharded);
    await commitShards(null, 'no more shards');
    const gone = await review(`${sharded}..HEAD`);
    expect(gone.code).toBe(1);
    expect(gone.stdout.split('\n')[1]).toBe('  reports.shards removed (it listed 2): each host keeps pushing to its last shard, and status reads only the fleet repository');
    await git(fleet.checkout, 'reset', '--quiet', '--hard', base);
  });

  it('a commit that adds a signer is shown as a trust change, signed or not', async () => {
    const base = (await git(fleet.checkout, 'rev-parse', 'HEAD')).trim();
    const key = signingKey(join(fleet.dir, 'stranger'), 'stranger');
    const pub = readFileSync(`${key}.pub`, 'utf8').split(' ').slice(0, 2).join(' ');
    const meshYaml = join(fleet.checkout, 'mesh.yaml');
    writeFileSync(meshYaml, readFileSync(meshYaml, 'utf8').replace(/^signers:\n/m, `signers:\n  - name: stranger\n    key: ${pub}\n`));
    await git(fleet.checkout, 'commit', '--quiet', '-am', 'trust a stranger');
    const r = await cli(fleet.checkout, 'verify-range', `${base}..HEAD`);
    expect(r.code).toBe(1);
    expect(r.stdout.split('\n').slice(0, 2)).toEqual(['TRUST CHANGES: mesh.yaml changes whom every host believes:', expect.stringMatching(/^ {2}signer added: stranger \(SHA256:\S+\)$/)]);
    const plan = await cli(fleet.checkout, 'plan', '--base', base, '--no-fetch');
    expect(plan.stdout.split('\n')[0]).toBe('TRUST CHANGES: mesh.yaml changes whom every host believes:');
    // validate, against main as fetched, says it first too (it is valid: a warning, not an error).
    const validate = await cli(fleet.checkout, 'validate', '--no-fetch');
    expect(validate.code).toBe(0);
    expect(validate.stdout.split('\n')[0]).toBe('TRUST CHANGES: mesh.yaml changes whom every host believes:');
    const github = await cli(fleet.checkout, 'validate', '--no-fetch', '--format', 'github');
    expect(github.stdout.split('\n')[0]).toMatch(/^::warning file=mesh.yaml,title=trust::TRUST CHANGES: mesh.yaml changes whom every host believes:%0A {2}signer added: stranger \(SHA256:/);
    expect(JSON.parse((await cli(fleet.checkout, 'validate', '--no-fetch', '--json')).stdout).trust).toMatchObject({ changes: [expect.stringMatching(/^signer added: stranger/)], suspects: [] });
    await git(fleet.checkout, 'reset', '--quiet', '--hard', base);
  });
});
