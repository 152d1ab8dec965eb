/**
 * A node's report push taken in-process (mesh-cli/server/report-receive.ts): what it takes, git
 * agrees with afterwards (git fsck, cat-file); what it does not take as it is, it hands to git
 * without having changed anything.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { pktLine } from '../core/git/pkt-line.js';
import { readPushCommands } from '../mesh-cli/server/push-commands.js';
import { reportReceiver } from '../mesh-cli/server/report-receive.js';
import { cli, createFleet, git as gitAsync, hostCmd, startServer } from './helpers/fleet.js';

const REF = 'refs/heads/reports/n1';
const top = mkdtempSync(join(tmpdir(), 'mesh-receive-'));
afterAll(() => rmSync(top, { recursive: true, force: true }));

const git = (cwd: string, args: string[], input?: string | Buffer): string =>
  execFileSync('git', args, { cwd, input, env: { ...process.env, GIT_AUTHOR_DATE: '2026-01-01T00:00:00Z', GIT_COMMITTER_DATE: '2026-01-01T00:00:00Z' } }).toString('utf8').trim();

/** A bare server repository and a work repository of the same object format to make report commits in. */
function repos(format: 'sha1' | 'sha256'): { server: string; work: string } {
  const dir = mkdtempSync(join(top, `${format}-`));
  git(dir, ['init', '--quiet', '--bare', `--object-format=${format}`, 'server.git']);
  git(dir, ['init', '--quiet', `--object-format=${format}`, 'work']);
  const work = join(dir, 'work');
  git(work, ['config', 'user.name', 'n1']);
  git(work, ['config', 'user.email', 'n1@localhost']);
  return { server: join(dir, 'server.git'), work };
}

/** A report commit made of `files` on top of `parent`; returns it and every object it is made of. */
function report(work: string, files: Record<string, string | Buffer>, parent: string | null, message = 'report'): { commit: string; objects: string[] } {
  const blobs = Object.entries(files).map(([name, text]) => [name, git(work, ['hash-object', '-w', '--stdin'], text)] as const);
  const tree = git(work, ['mktree'], blobs.map(([name, oid]) => `100644 blob ${oid}\t${name}\n`).join(''));
  const commit = git(work, ['commit-tree', tree, ...(parent ? ['-p', parent] : []), '-m', message]);
  return { commit, objects: [commit, tree, ...blobs.map(([, oid]) => oid)] };
}

/** A pack of exactly `objects`, whole (no deltas) unless `deltas`. */
function pack(work: string, objects: string[], deltas = false): Buffer {
  return execFileSync('git', ['pack-objects', '--stdout', ...(deltas ? [] : ['--window=0', '--depth=0'])], { cwd: work, input: objects.map((o) => `${o}\n`).join('') });
}

function body(old: string, tip: string, packed: Buffer, { ref = REF, caps = 'report-status agent=mesh-host' } = {}): Buffer {
  return Buffer.concat([Buffer.from(pktLine(`${old} ${tip} ${ref}\0${caps}\n`) + '0000'), packed]);
}

async function receive(server: string, bytes: Buffer, node = 'n1'): Promise<Buffer | null> {
  const push = await readPushCommands(Readable.from([bytes]));
  const receiver = reportReceiver();
  try {
    return await receiver.receive(server, node, push!, bytes);
  } finally {
    await receiver.close();
  }
}

const tip = (server: string): string => git(server, ['rev-parse', REF]);
const files = (status: string) => ({ 'status.json': `{\n  "kind": "report",\n  "note": "${status}"\n}\n`, 'status.json.sig': `sig of ${status}\n` });

/** Lock files and temporary objects left anywhere in the repository. */
function leftovers(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.lock') || p.includes('tmp_obj_'));
}

describe.each(['sha1', 'sha256'] as const)('a %s repository', (format) => {
  it('takes a first report, one on top and a heartbeat in place of the tip as git would, and git fsck agrees', async () => {
    const { server, work } = repos(format);
    const zero = '0'.repeat(format === 'sha1' ? 40 : 64);
    const first = report(work, files('first'), null);
    expect((await receive(server, body(zero, first.commit, pack(work, first.objects))))?.toString()).toBe(
      `${pktLine('unpack ok\n')}${pktLine(`ok ${REF}\n`)}0000`);
    expect(tip(server)).toBe(first.commit);
    const second = report(work, files('second'), first.commit);
    expect(await receive(server, body(first.commit, second.commit, pack(work, second.objects)))).not.toBeNull();
    const beat = report(work, files('beat 1'), second.commit, 'heartbeat');
    expect(await receive(server, body(second.commit, beat.commit, pack(work, beat.objects)))).not.toBeNull();
    // The next heartbeat replaces that one: its parent is the tip's parent, not the tip.
    const again = report(work, files('beat 2'), second.commit, 'heartbeat');
    const banded = await receive(server, body(beat.commit, again.commit, pack(work, again.objects), { caps: 'report-status side-band-64k quiet agent=git/2' }));
    expect(banded?.toString()).toBe(pktLine(`\x01${pktLine('unpack ok\n')}${pktLine(`ok ${REF}\n`)}0000`) + '0000');
    expect(tip(server)).toBe(again.commit);
    expect(git(server, ['rev-list', REF])).toBe([again.commit, second.commit, first.commit].join('\n'));
    expect(git(server, ['cat-file', '-p', `${REF}:status.json`])).toContain('"note": "beat 2"');
    execFileSync('git', ['fsck', '--strict', '--no-dangling'], { cwd: server, stdio: 'pipe' });
    expect(leftovers(server)).toEqual([]);
  });

  it('hands git every push it would not take as it is, having changed nothing', async () => {
    const { server, work } = repos(format);
    const base = report(work, files('base'), null);
    const first = report(work, files('first'), base.commit);
    git(work, ['update-ref', 'refs/heads/x', first.commit]);
    git(work, ['push', '--quiet', server, `${first.commit}:${REF}`]);
    const next = report(work, files('next'), first.commit);
    const ok = pack(work, next.objects);
    const junk = git(work, ['hash-object', '-w', '--stdin'], 'not reachable\n');
    const enrolment = report(work, { 'status.json': '{\n  "kind": "enrolment"\n}\n' }, first.commit);
    const big = report(work, { 'status.json': Buffer.alloc(1024 * 1024 + 1, 97) }, first.commit);
    const odd = report(work, files('on'), report(work, files('odd'), base.commit).commit);
    const refused: Array<[string, Buffer, string?]> = [
      ['an old id that is not the tip', body(base.commit, next.commit, ok)],
      ['an enrolment', body(first.commit, enrolment.commit, pack(work, enrolment.objects))],
      ['a file over 1 MiB', body(first.commit, big.commit, pack(work, big.objects))],
      ['an object the tip does not reach', body(first.commit, next.commit, pack(work, [...next.objects, junk]))],
      ['a file the pack lacks', body(first.commit, next.commit, pack(work, next.objects.slice(0, -1)))],
      ['a parent that is neither the tip nor its parent', body(first.commit, odd.commit, pack(work, odd.objects))],
      ['push options', body(first.commit, next.commit, ok, { caps: 'report-status push-options' })],
      ['another ref', body(zero(format), next.commit, ok, { ref: 'refs/heads/reports/n2' })],
      ['a broken checksum', body(first.commit, next.commit, Buffer.concat([ok.subarray(0, -1), Buffer.from([ok.at(-1)! ^ 1])]))],
      ['a byte after the pack', body(first.commit, next.commit, Buffer.concat([ok, Buffer.from('x')]))],
      ['a tip the pack lacks', body(first.commit, base.commit, pack(work, []))],
    ];
    // Deltas: two large files alike, packed with deltas allowed.
    const alike = report(work, { 'status.json': 'a'.repeat(50_000) + '1', 'status.json.sig': 'a'.repeat(50_000) + '2' }, first.commit);
    const deltified = pack(work, alike.objects, true);
    refused.push(['a pack with deltas', body(first.commit, alike.commit, deltified)]);
    for (const [why, bytes] of refused) {
      expect(await receive(server, bytes), why).toBeNull();
      expect(tip(server), why).toBe(first.commit);
      expect(leftovers(server), why).toEqual([]);
    }
    // A lock git holds on the ref.
    writeFileSync(join(server, `${REF}.lock`), '');
    expect(await receive(server, body(first.commit, next.commit, ok))).toBeNull();
    rmSync(join(server, `${REF}.lock`));
    // A repository that logs ref updates: git writes the log.
    git(server, ['config', 'core.logAllRefUpdates', 'true']);
    expect(await receive(server, body(first.commit, next.commit, ok))).toBeNull();
    git(server, ['config', '--unset', 'core.logAllRefUpdates']);
    // The same push, nothing in its way, is taken.
    expect(await receive(server, body(first.commit, next.commit, ok))).not.toBeNull();
    expect(tip(server)).toBe(next.commit);
    // A heartbeat replacing a tip that gc packed: its parent cannot be read without git.
    git(server, ['repack', '-a', '-d', '-q']);
    git(server, ['prune-packed']);
    const beat = report(work, files('beat'), first.commit, 'heartbeat');
    expect(await receive(server, body(next.commit, beat.commit, pack(work, beat.objects)))).toBeNull();
    expect(tip(server)).toBe(next.commit);
    execFileSync('git', ['fsck', '--strict', '--no-dangling'], { cwd: server, stdio: 'pipe' });
  });
});

function zero(format: 'sha1' | 'sha256'): string {
  return '0'.repeat(format === 'sha1' ? 40 : 64);
}

it('a host\'s reports and heartbeats through mesh-cli serve are taken without git, its enrolment by git; status reads them', async () => {
  const fleet = await createFleet();
  try {
    const root = await fleet.enrol('rr-1');
    await fleet.commit({ 'nodes/rr-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/rr\n    content: "x\\n"\n' }, 'rr');
    for (let i = 0; i < 3; i++) {
      const r = await hostCmd(root, 'run', '--once', '--heartbeat', '1ms');
      expect(r.code, r.stderr + r.stdout).toBe(0);
    }
    const pushes = fleet.server.stderr().split('\n').filter((l) => l.includes('git-receive-pack') && l.includes('"user":"rr-1"') && l.includes('"status":200'));
    // The enrolment went to git (its hook records the token's use); the real report and the heartbeats after it were taken in-process.
    expect(pushes.map((l) => l.includes('"inProcess":true'))).toEqual([false, true, true, true]);
    const row = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0];
    expect(row).toMatchObject({ node: 'rr-1', signature: 'valid', outcome: 'applied', chain: 'ok', sequence: 4 });
    await gitAsync(join(fleet.server.data, 'fleet.git'), 'fsck', '--strict', '--no-dangling');
  } finally {
    await fleet.close();
  }
});

it('a report branch\'s lock left by a server killed mid-update is removed at the next start, and the node\'s pushes land again', async () => {
  const fleet = await createFleet();
  try {
    const root = await fleet.enrol('rr-2');
    await fleet.commit({ 'nodes/rr-2/base.yaml': 'resources:\n  - type: file\n    path: /etc/rr\n    content: "x\\n"\n' }, 'rr');
    const refs = join(fleet.server.data, 'fleet.git', 'refs/heads/reports');
    // What a kill between taking the lock and renaming it leaves; and a fresh lock, which may be a live update.
    writeFileSync(join(refs, 'rr-2.lock'), '');
    const old = new Date(Date.now() - 5 * 60_000);
    utimesSync(join(refs, 'rr-2.lock'), old, old);
    writeFileSync(join(refs, 'other.lock'), '');
    const locked = await hostCmd(root, 'run', '--once');
    expect(locked.code).not.toBe(0); // the lock is held: the push is refused, as git refuses it
    await fleet.server.stop('SIGKILL');
    fleet.server = await startServer(fleet.server.data, Number(new URL(fleet.server.url).port));
    expect(readdirSync(refs).sort()).toEqual(['other.lock', 'rr-2']);
    expect(fleet.server.stderr()).toContain('"ref":"refs/heads/reports/rr-2"');
    const pass = await hostCmd(root, 'run', '--once');
    expect(pass.code, pass.stderr).toBe(0);
    expect(JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0]).toMatchObject({ node: 'rr-2', outcome: 'applied', signature: 'valid' });
  } finally {
    await fleet.close();
  }
});
