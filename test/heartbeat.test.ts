/**
 * Heartbeats through the real host: a report that says nothing new (the same commit, outcome and
 * failures) replaces the heartbeat before it, whether the pass succeeded or failed, and status
 * still verifies the chain.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect, it } from 'vitest';
import { MESH_HOST, cli, createFleet, git, hostCmd } from './helpers/fleet.js';

it('a heartbeat replaces the previous heartbeat while every real report is kept, and the chain stays ok', async () => {
  const fleet = await createFleet();
  try {
    const root = await fleet.enrol('hb-1');
    await fleet.commit({ 'nodes/hb-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/hb\n    content: "x\\n"\n' }, 'hb');
    // status between passes too: it checks each new tip against the one it saw before it,
    // and a heartbeat that replaced the heartbeat it saw descends from that one's parent.
    for (let i = 0; i < 4; i++) {
      const r = await hostCmd(root, 'run', '--once', '--heartbeat', '1ms');
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const row = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0];
      expect(row).toMatchObject({ node: 'hb-1', signature: 'valid', outcome: 'applied', chain: 'ok', sequence: i + 2 });
    }
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    const log = (await git(fleet.checkout, 'log', '--format=%s', 'origin/reports/hb-1')).split('\n');
    // #1 enrolment and #2 the apply are real; #3 is the first heartbeat; #4 was replaced by #5.
    expect(log.map((s) => s.split(':')[0])).toEqual(['report hb-1 #5', 'report hb-1 #3', 'report hb-1 #2', 'report hb-1 #1']);
  } finally {
    await fleet.close();
  }
});

it('a node failing the same way for 100 passes adds one real report and one heartbeat; with the heartbeat not due it pushes nothing', async () => {
  const fleet = await createFleet();
  try {
    const root = await fleet.enrol('hb-2');
    // Two failures that word themselves differently every pass: a file under a path that is a file, and a command whose output is the time.
    writeFileSync(join(root, 'etc/blocker'), 'a file, not a folder\n');
    const declaration = 'resources:\n  - type: file\n    path: /etc/blocker/x\n    content: "x\\n"\n  - type: command\n    name: stamp\n    run: "date +%s%N; exit 3"\n    shell: true\n';
    await fleet.commit({ 'nodes/hb-2/base.yaml': declaration }, 'fails every pass');
    // 100 passes with the heartbeat not due: the first failure is news and is pushed; the 99 that fail the same way send nothing,
    // as unchanged healthy passes do. Then two passes with the heartbeat due: the second's heartbeat replaces the first's.
    const passes = await runPasses(root, 100, ['--interval', '1ms']);
    expect(passes.map((p) => p.outcome)).toEqual(Array(100).fill('failed'));
    expect(passes.map((p) => p.delivery)).toEqual(['pushed', ...Array(99).fill('unchanged')]);
    for (let i = 0; i < 2; i++) expect(JSON.parse((await hostCmd(root, 'run', '--once', '--json', '--heartbeat', '1ms')).stdout)).toMatchObject({ outcome: 'failed', delivery: 'pushed' });
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    const log = (await git(fleet.checkout, 'log', '--format=%s', 'origin/reports/hb-2')).split('\n');
    // #1 the enrolment, #2 the first failure (real), #4 the last heartbeat (it replaced #3), carrying its pass's full result.
    expect(log.map((s) => s.split(':')[0])).toEqual(['report hb-2 #4', 'report hb-2 #2', 'report hb-2 #1']);
    const row = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0];
    expect(row).toMatchObject({ node: 'hb-2', outcome: 'failed', signature: 'valid', chain: 'ok', sequence: 4 });
    // A change in what fails is news at once: the blocker made a folder by hand, the file applies and only the command fails.
    unlinkSync(join(root, 'etc/blocker'));
    mkdirSync(join(root, 'etc/blocker'));
    expect(JSON.parse((await hostCmd(root, 'run', '--once', '--json')).stdout)).toMatchObject({ outcome: 'failed', delivery: 'pushed', sequence: 5 });
  } finally {
    await fleet.close();
  }
}, 120_000);

interface Pass {
  outcome: string;
  delivery: string;
  sequence: number;
}

/** Run `mesh-host run --json` until it has made `count` passes, then stop it; each pass as it printed it. */
async function runPasses(root: string, count: number, args: string[]): Promise<Pass[]> {
  const child = spawn('node', [MESH_HOST, 'run', '--json', ...args, '--root', root], { env: { ...process.env, MESH_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'inherit'] });
  const passes: Pass[] = [];
  for await (const line of createInterface({ input: child.stdout })) {
    passes.push(JSON.parse(line));
    if (passes.length === count) break;
  }
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  return passes;
}
