/**
 * A report branch that no longer fast-forwards, end to end on the built `mesh-cli serve` and
 * `mesh-host`: a machine whose state folder (store and git cache) was restored from an older copy
 * finds the server's report branch ahead of its own. It continues the chain from the server's
 * tip when that tip is its own report (signed with its node key, for its node and generation),
 * pushes on the same pass and says why; a tip signed by any other key is never adopted, nor
 * overwritten, and the host says so instead of blaming the network.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd, signingKey, type TestFleet } from './helpers/fleet.js';

let fleet: TestFleet;

beforeAll(async () => {
  fleet = await createFleet();
});
afterAll(async () => fleet?.close());

const motd = (node: string, text: string) => ({ [`nodes/${node}/base.yaml`]: `resources:\n  - type: file\n    path: /etc/motd\n    content: "${text}\\n"\n` });
const pass = async (root: string, ...args: string[]) => {
  const r = await hostCmd(root, 'run', '--once', '--json', ...args);
  return { ...r, body: r.stdout.startsWith('{') ? (JSON.parse(r.stdout) as Record<string, unknown> & { sequence: number; errors: Array<{ code: string; message: string }> }) : null };
};
const row = async (node: string) => (JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout) as { nodes: Array<Record<string, unknown>> }).nodes.find((n) => n.node === node);
/** The subjects of the server's report branch of `node`, newest first, as "report <node> #N". */
async function history(node: string): Promise<string[]> {
  await git(fleet.checkout, 'fetch', '--quiet', 'origin', `+refs/heads/reports/${node}:refs/remotes/origin/reports/${node}`);
  return (await git(fleet.checkout, 'log', '--format=%s', `origin/reports/${node}`)).split('\n').map((s) => s.split(':')[0]!);
}
/** "SHA256:…" of an OpenSSH public key line, as ssh-keygen prints it. */
const fingerprintOf = (line: string) => execFileSync('ssh-keygen', ['-lf', '-'], { input: line, encoding: 'utf8' }).split(' ')[1]!;
const stateDir = (root: string) => join(root, 'var/lib/mesh-host');
/** Put the copy `aside` back as the machine's state folder, as a restore from a backup does. */
function restore(root: string, aside: string): void {
  rmSync(stateDir(root), { recursive: true, force: true });
  cpSync(aside, stateDir(root), { recursive: true });
}

describe('a state folder restored from an older copy', { timeout: 120_000 }, () => {
  it('continues the server\'s chain on the next pass, says why in the report, and status shows the chain ok', async () => {
    const root = await fleet.enrol('web-1');
    await fleet.commit(motd('web-1', 'one'), 'web-1: one');
    expect((await pass(root)).body).toMatchObject({ sequence: 2, delivery: 'pushed' });
    const aside = join(fleet.dir, 'web-1.state');
    cpSync(stateDir(root), aside, { recursive: true });
    for (const text of ['two', 'three']) {
      await fleet.commit(motd('web-1', text), `web-1: ${text}`);
      expect((await pass(root)).body).toMatchObject({ outcome: 'applied', delivery: 'pushed' });
    }
    expect(await row('web-1')).toMatchObject({ sequence: 4, signature: 'valid', chain: 'ok' });
    await history('web-1');
    const fourth = JSON.parse(await git(fleet.checkout, 'show', 'origin/reports/web-1:status.json')) as { sequence: number; observedAt: string };
    expect(fourth.sequence).toBe(4);

    restore(root, aside);
    const recovered = await pass(root);
    expect(recovered.code, recovered.stderr + recovered.stdout).toBe(0);
    expect(recovered.stdout + recovered.stderr).not.toContain('unreachable');
    expect(recovered.body).toMatchObject({ sequence: 5, outcome: 'applied', delivery: 'pushed', sent: true, disconnected: null });
    expect(recovered.body!.errors).toEqual([{
      code: 'E_REPORT_BRANCH_AHEAD',
      message: `the server's report branch was ahead of this machine's (report #4, made at ${fourth.observedAt}): the state folder was likely restored from an older copy; continuing from it`,
    }]);
    expect(await row('web-1')).toMatchObject({ sequence: 5, signature: 'valid', chain: 'ok' });
    expect(await history('web-1')).toEqual(['report web-1 #5', 'report web-1 #4', 'report web-1 #3', 'report web-1 #2', 'report web-1 #1']);

    // The pass after says nothing more about it, and the chain goes on.
    const next = await pass(root);
    expect(next.body).toMatchObject({ sequence: 6, errors: [], delivery: 'pushed' });
    expect(await row('web-1')).toMatchObject({ sequence: 6, signature: 'valid', chain: 'ok' });
  });

  it('a heartbeat made on the old copy does not replace the newer reports on the server', async () => {
    const root = await fleet.enrol('web-2');
    await fleet.commit(motd('web-2', 'one'), 'web-2: one');
    const beat = () => pass(root, '--heartbeat', '1ms');
    // #2 applies, #3 says "unchanged", #4 is a heartbeat: the copy is taken with a heartbeat at the tip.
    for (const sequence of [2, 3, 4]) expect((await beat()).body).toMatchObject({ sequence, delivery: 'pushed' });
    const aside = join(fleet.dir, 'web-2.state');
    cpSync(stateDir(root), aside, { recursive: true });
    // Drift corrected (#5), then "unchanged" again (#6): real reports, on top of the heartbeat.
    writeFileSync(join(root, 'etc/motd'), 'drift\n');
    for (const sequence of [5, 6]) expect((await beat()).body).toMatchObject({ sequence, delivery: 'pushed' });
    expect(await row('web-2')).toMatchObject({ sequence: 6, signature: 'valid', chain: 'ok' });

    // The old copy says nothing new since its heartbeat #4, which its next heartbeat replaces: pushing that would rewind the branch.
    restore(root, aside);
    const recovered = await beat();
    expect(recovered.code, recovered.stderr + recovered.stdout).toBe(0);
    expect(recovered.body).toMatchObject({ sequence: 7, delivery: 'pushed', errors: [{ code: 'E_REPORT_BRANCH_AHEAD' }] });
    expect(await row('web-2')).toMatchObject({ sequence: 7, signature: 'valid', chain: 'ok' });
    expect(await history('web-2')).toEqual(['report web-2 #7', 'report web-2 #6', 'report web-2 #5', 'report web-2 #4', 'report web-2 #3', 'report web-2 #2', 'report web-2 #1']);
  });

  it('what mesh made after the copy was taken stays its own: un-declared later, it is removed, not left as found', async () => {
    const root = await fleet.enrol('web-5');
    const extra = { 'nodes/web-5/extra.yaml': 'resources:\n  - type: file\n    path: /etc/extra.conf\n    content: "made by mesh\\n"\n' };
    await fleet.commit(motd('web-5', 'one'), 'web-5: one');
    expect((await pass(root)).body).toMatchObject({ sequence: 2, delivery: 'pushed' });
    const aside = join(fleet.dir, 'web-5.state');
    cpSync(stateDir(root), aside, { recursive: true });
    await fleet.commit(extra, 'web-5: extra');
    expect((await pass(root)).body).toMatchObject({ sequence: 3, outcome: 'applied', delivery: 'pushed' });
    expect(readFileSync(join(root, 'etc/extra.conf'), 'utf8')).toBe('made by mesh\n');

    // The older store does not know /etc/extra.conf, and finds it here; the server's report #3 says mesh made it.
    restore(root, aside);
    const recovered = await pass(root);
    expect(recovered.code, recovered.stderr + recovered.stdout).toBe(0);
    expect(recovered.body!.errors).toEqual([{
      code: 'E_REPORT_BRANCH_AHEAD',
      message: expect.stringMatching(/continuing from it, and from its owned set \(1 resource the older copy did not know mesh had made or taken over\)$/),
    }]);

    await fleet.commit({ 'nodes/web-5/extra.yaml': null }, 'web-5: no extra');
    const removed = await pass(root);
    expect(removed.body).toMatchObject({ outcome: 'applied', delivery: 'pushed' });
    expect((removed.body as unknown as { resources: Array<{ id: string; result: string }> }).resources).toContainEqual(expect.objectContaining({ id: 'file:/etc/extra.conf', result: 'removed' }));
    expect(existsSync(join(root, 'etc/extra.conf'))).toBe(false);
  });

  it('two machines reporting as one node (a copy of its disk running elsewhere) are named as such once they keep continuing from each other', async () => {
    const root = await fleet.enrol('web-6');
    await fleet.commit(motd('web-6', 'one'), 'web-6: one');
    expect((await pass(root)).body).toMatchObject({ sequence: 2, delivery: 'pushed' });
    const copy = `${root}-copy`;
    cpSync(root, copy, { recursive: true });
    // Each pass has nothing new to say: its heartbeat (due at once here) is what meets the other's.
    expect((await pass(copy, '--heartbeat', '1ms')).body).toMatchObject({ sequence: 3, delivery: 'pushed', errors: [] });
    const lines = async (r: string) => (await pass(r, '--heartbeat', '1ms')).body!.errors.map((e) => e.message);
    // Each one's first continuation reads as a restore; the original's second one names what it is.
    expect(await lines(root)).toEqual([expect.stringMatching(/state folder was likely restored from an older copy; continuing from it$/)]);
    expect(await lines(copy)).toEqual([expect.stringMatching(/state folder was likely restored from an older copy; continuing from it$/)]);
    const named = await lines(root);
    expect(named).toEqual([expect.stringContaining(`It continued from the server's branch before, at `)]);
    expect(named[0]).toContain(`another machine holds this machine's node key and reports as web-6 (a copy of its disk, running elsewhere), and the two push over each other's reports. Stop the copy, or give it a name of its own: on it, move ${join(root, 'etc/mesh-host')} and ${join(root, 'var/lib/mesh-host')} away`);
    expect(await row('web-6')).toMatchObject({ sequence: 6, signature: 'valid', chain: 'ok' });
    rmSync(copy, { recursive: true, force: true });
  });

  it('a store restored alone (its git cache kept) continues from its own report branch before the pass applies: the chain stays whole, and what mesh made since stays its own', async () => {
    const root = await fleet.enrol('web-7');
    await fleet.commit(motd('web-7', 'one'), 'web-7: one');
    expect((await pass(root)).body).toMatchObject({ sequence: 2, delivery: 'pushed' });
    const aside = join(fleet.dir, 'web-7.store');
    const storeFiles = () => readdirSync(stateDir(root)).filter((f) => f.startsWith('store'));
    mkdirSync(aside);
    for (const f of storeFiles()) cpSync(join(stateDir(root), f), join(aside, f));
    await fleet.commit({ 'nodes/web-7/extra.yaml': 'resources:\n  - type: file\n    path: /etc/extra.conf\n    content: "made by mesh\\n"\n' }, 'web-7: extra');
    expect((await pass(root)).body).toMatchObject({ sequence: 3, outcome: 'applied', delivery: 'pushed' });

    for (const f of storeFiles()) rmSync(join(stateDir(root), f));
    for (const f of readdirSync(aside)) cpSync(join(aside, f), join(stateDir(root), f));
    // --noop writes nothing, so it plans from the store as it is, and says what a pass would do first.
    const stored = () => storeFiles().map((f) => readFileSync(join(stateDir(root), f), 'base64'));
    const before = stored();
    const planned = await hostCmd(root, 'run', '--once', '--noop');
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toMatch(/\n {2}note: this machine's store is behind its own report branch \(report #3, made at \S+\): a pass would first continue from that report, and from its owned set, which lists what the store does not \(file:\/etc\/extra\.conf: planned here as if found on this machine, a pass would own them as made by mesh\)\n/);
    expect(stored()).toEqual(before);
    const resumed = await pass(root);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    expect(resumed.body).toMatchObject({ sequence: 4, outcome: 'applied', delivery: 'pushed' });
    expect(resumed.body!.errors).toEqual([{
      code: 'E_STORE_BEHIND',
      message: expect.stringMatching(/^this machine's store was behind its own report branch \(report #3, made at \S+\): a pass stopped before its store recorded that report, or the store was restored from an older copy; continuing from that report, and from its owned set \(1 resource the older copy did not know mesh had made or taken over\)$/),
    }]);
    expect(await row('web-7')).toMatchObject({ sequence: 4, signature: 'valid', chain: 'ok' });

    await fleet.commit({ 'nodes/web-7/extra.yaml': null }, 'web-7: no extra');
    const removed = await pass(root);
    expect((removed.body as unknown as { resources: Array<{ id: string; result: string }> }).resources).toContainEqual(expect.objectContaining({ id: 'file:/etc/extra.conf', result: 'removed' }));
    expect(existsSync(join(root, 'etc/extra.conf'))).toBe(false);
    expect((await pass(root)).body).toMatchObject({ errors: [] });
  });

  it('a git cache deleted by hand: the next pass continues from the server\'s branch, not from a new root', async () => {
    const root = await fleet.enrol('web-4');
    await fleet.commit(motd('web-4', 'one'), 'web-4: one');
    expect((await pass(root)).body).toMatchObject({ sequence: 2, delivery: 'pushed' });
    await history('web-4');
    const second = JSON.parse(await git(fleet.checkout, 'show', 'origin/reports/web-4:status.json')) as { observedAt: string };
    rmSync(join(stateDir(root), 'git'), { recursive: true });

    await fleet.commit(motd('web-4', 'two'), 'web-4: two');
    const recovered = await pass(root);
    expect(recovered.code, recovered.stderr + recovered.stdout).toBe(0);
    expect(recovered.body).toMatchObject({ sequence: 3, outcome: 'applied', delivery: 'pushed', disconnected: null });
    expect(recovered.body!.errors).toEqual([{
      code: 'E_REPORT_BRANCH_AHEAD',
      message: `the server's report branch holds a report that is not in this machine's history (report #2, made at ${second.observedAt}): this machine's git cache, or the server, was likely replaced or restored from an older copy; continuing from it`,
    }]);
    expect(await history('web-4')).toEqual(['report web-4 #3', 'report web-4 #2', 'report web-4 #1']);
    expect(await row('web-4')).toMatchObject({ sequence: 3, signature: 'valid', chain: 'ok' });
  });
});

describe('a report branch whose tip this host did not sign', { timeout: 120_000 }, () => {
  it('is not adopted and not overwritten: the pass says whose it is, and the host pushes again once the branch is put back', async () => {
    const root = await fleet.enrol('web-3');
    await fleet.commit(motd('web-3', 'one'), 'web-3: one');
    expect((await pass(root)).body).toMatchObject({ sequence: 2, delivery: 'pushed' });
    await history('web-3');
    const own = await git(fleet.checkout, 'rev-parse', 'origin/reports/web-3');

    // With the operator's git credential: a report #3 on top, naming another node key and signed by it.
    const mallory = signingKey(join(fleet.dir, 'mallory_ed25519'), 'mallory');
    const report = JSON.parse(await git(fleet.checkout, 'show', `${own}:status.json`)) as Record<string, unknown>;
    const forged = { ...report, sequence: 3, nodeKey: readFileSync(`${mallory}.pub`, 'utf8').trim(), observedAt: new Date().toISOString() };
    const file = join(fleet.dir, 'status.json');
    writeFileSync(file, JSON.stringify(forged, null, 2) + '\n');
    execFileSync('ssh-keygen', ['-q', '-Y', 'sign', '-n', 'mesh-report', '-f', mallory, file]);
    const blob = (f: string) => git(fleet.checkout, 'hash-object', '-w', f);
    const entries = `100644 blob ${await blob(file)}\tstatus.json\n100644 blob ${await blob(`${file}.sig`)}\tstatus.json.sig\n`;
    const forgedTree = execFileSync('git', ['mktree'], { cwd: fleet.checkout, input: entries, encoding: 'utf8' }).trim();
    const forgedCommit = await git(fleet.checkout, 'commit-tree', '--no-gpg-sign', forgedTree, '-p', own, '-m', 'report web-3 #3: applied');
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', `${forgedCommit}:refs/heads/reports/web-3`);

    await fleet.commit(motd('web-3', 'two'), 'web-3: two');
    const refused = await pass(root);
    expect(refused.code).toBe(2);
    const nodeKey = (JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8')) as { nodeKey: string }).nodeKey;
    expect(refused.stderr).toContain(
      `mesh-host: the server's reports/web-3 (${forgedCommit.slice(0, 12)}) holds a report this machine did not make: its status.json is signed by ${fingerprintOf(readFileSync(`${mallory}.pub`, 'utf8'))}, ` +
        `not by this machine's node key ${fingerprintOf(nodeKey)} (it claims to be report #3 of web-3 generation 1). It is neither adopted nor pushed over`,
    );
    expect(refused.stderr).not.toContain('unreachable');
    expect(await git(fleet.checkout, 'ls-remote', 'origin', 'refs/heads/reports/web-3')).toMatch(new RegExp(`^${forgedCommit}`));
    const gitdir = join(stateDir(root), 'git');
    const local = await git(root, '--git-dir', gitdir, 'rev-parse', 'refs/heads/reports/web-3');
    expect(await git(root, '--git-dir', gitdir, 'rev-parse', `${local}~1`)).toBe(own);
    expect(JSON.parse(readFileSync(join(stateDir(root), 'store.json'), 'utf8')).report).toMatchObject({ sequence: 3, pushed: false });

    // The operator puts the branch back: the report kept on the machine (#3) goes out with the next pass's (#4).
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', `${own}:refs/heads/reports/web-3`);
    const after = await pass(root);
    expect(after.code, after.stderr + after.stdout).toBe(0);
    expect(after.body).toMatchObject({ sequence: 4, errors: [], delivery: 'pushed', sent: true });
    expect(await history('web-3')).toEqual(['report web-3 #4', 'report web-3 #3', 'report web-3 #2', 'report web-3 #1']);
    expect(await row('web-3')).toMatchObject({ sequence: 4, signature: 'valid', chain: 'ok' });
  });
});
