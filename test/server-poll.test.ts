/**
 * The hosts' poll of main answered by `mesh-cli serve` itself (mesh-cli/server/ls-refs.ts): the
 * same bytes as git's own `upload-pack` gives for the same request, whether main's ref is loose,
 * packed or not there yet; anything else is left to git. Through the real server, a host's pass
 * that finds main unmoved starts no git process on the server.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { mainTipFromFiles, packedOid, SETTLE_MS } from '../mesh-cli/server/main-stamp.js';
import { pktLine } from '../core/git/pkt-line.js';
import { answerMainPoll } from '../mesh-cli/server/ls-refs.js';
import { createFleet, git, hostCmd } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

const request = (...args: string[]) => Buffer.from(pktLine('command=ls-refs\n') + pktLine('agent=mesh-host\n') + '0001' + args.map((a) => pktLine(`${a}\n`)).join('') + '0000');

/** What git's own upload-pack answers to `body` in `dir` (protocol v2, stateless, as http-backend runs it). */
const gitAnswer = (dir: string, body: Buffer) => execFileSync('git', ['upload-pack', '--stateless-rpc', dir], { input: body, env: { ...process.env, GIT_PROTOCOL: 'version=2' } });

function repo(): string {
  const dir = join(tempDir('mesh-poll-'), 'fleet.git');
  execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', dir]);
  return dir;
}

function commitTo(dir: string, ref: string): string {
  const tree = execFileSync('git', ['mktree'], { cwd: dir, input: '' }).toString().trim();
  const commit = execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit-tree', tree, '-m', 'x'], { cwd: dir }).toString().trim();
  execFileSync('git', ['update-ref', ref, commit], { cwd: dir });
  return commit;
}

describe('answerMainPoll', () => {
  it('answers an ls-refs of main byte for byte as git does: unborn, loose and packed', () => {
    const dir = repo();
    const poll = request('ref-prefix refs/heads/main');
    expect(answerMainPoll(poll, dir)).toEqual(gitAnswer(dir, poll)); // no main yet: an empty list
    commitTo(dir, 'refs/heads/main');
    commitTo(dir, 'refs/heads/reports/web-1');
    expect(answerMainPoll(poll, dir)!.toString()).toMatch(/^003d[0-9a-f]{40} refs\/heads\/main\n0000$/);
    expect(answerMainPoll(poll, dir)).toEqual(gitAnswer(dir, poll));
    execFileSync('git', ['pack-refs', '--all'], { cwd: dir });
    expect(readFileSync(join(dir, 'packed-refs'), 'utf8')).toContain(' refs/heads/main\n');
    expect(answerMainPoll(poll, dir)).toEqual(gitAnswer(dir, poll));
  });

  it("finds main's line in packed-refs and nothing that only contains its name; a repacked main is seen", () => {
    const oid = (c: string) => c.repeat(40);
    const packed = (lines: string[]) => Buffer.from(['# pack-refs with: peeled fully-peeled sorted ', ...lines].join('\n'));
    const lines = [`${oid('a')} refs/heads/main-old`, `${oid('b')} refs/heads/main`, `^${oid('c')}`, `${oid('d')} refs/heads/reports/refs/heads/main`];
    expect(packedOid(packed(lines), 'refs/heads/main')).toBe(oid('b'));
    expect(packedOid(packed([`${oid('e')} refs/heads/main`]), 'refs/heads/main')).toBe(oid('e')); // the last line, no newline
    expect(packedOid(packed([`${oid('e')} refs/heads/main\r`, '']), 'refs/heads/main')).toBe(oid('e'));
    expect(packedOid(packed([lines[0]!, lines[3]!, '']), 'refs/heads/main')).toBeNull();
    expect(packedOid(Buffer.alloc(0), 'refs/heads/main')).toBeNull();

    // Through the files, as if the packed-refs files had settled (their answer is then kept while their stamp holds).
    const later = () => Date.now() + 2 * SETTLE_MS;
    const dir = repo();
    const first = commitTo(dir, 'refs/heads/main');
    execFileSync('git', ['pack-refs', '--all'], { cwd: dir });
    expect(mainTipFromFiles(dir, later())).toEqual({ ref: 'refs/heads/main', oid: first });
    expect(mainTipFromFiles(dir, later())).toEqual({ ref: 'refs/heads/main', oid: first });
    const second = commitTo(dir, 'refs/heads/main');
    execFileSync('git', ['pack-refs', '--all'], { cwd: dir }); // a new packed-refs, renamed into place
    expect(mainTipFromFiles(dir, later())).toEqual({ ref: 'refs/heads/main', oid: second });
    expect(mainTipFromFiles(dir)).toEqual({ ref: 'refs/heads/main', oid: second });
  });

  it('leaves to git every other request: other refs, more arguments, another command, a broken body', () => {
    const dir = repo();
    commitTo(dir, 'refs/heads/main');
    expect(answerMainPoll(request('ref-prefix refs/heads/reports/web-1'), dir)).toBeNull();
    expect(answerMainPoll(request('ref-prefix refs/heads/main', 'ref-prefix refs/heads/reports/web-1'), dir)).toBeNull();
    expect(answerMainPoll(request('peel', 'ref-prefix refs/heads/main'), dir)).toBeNull();
    expect(answerMainPoll(request('symrefs', 'ref-prefix refs/heads/main'), dir)).toBeNull();
    expect(answerMainPoll(request(), dir)).toBeNull(); // every ref
    expect(answerMainPoll(Buffer.from(pktLine('command=fetch\n') + '0001' + pktLine('done\n') + '0000'), dir)).toBeNull();
    expect(answerMainPoll(Buffer.from('00zz'), dir)).toBeNull();
    execFileSync('git', ['symbolic-ref', 'HEAD', 'refs/heads/other'], { cwd: dir });
    expect(answerMainPoll(request('ref-prefix refs/heads/main'), dir)).toBeNull(); // main is not HEAD's branch here
  });
});

it('a host pass that finds main unmoved starts no git process on the server; a moved main is still fetched', async () => {
  const fleet = await createFleet();
  try {
    const root = await fleet.enrol('web-1');
    await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "one\\n"\n' }, 'one');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0); // "0 changed" is news once: pushed; from here on nothing is
    // The CPU time of the server's children that have ended (utime + stime of reaped processes, /proc/PID/stat fields 16 and 17).
    const children = () => readFileSync(`/proc/${fleet.server.proc.pid}/stat`, 'utf8').split(') ')[1]!.split(' ').slice(13, 15).reduce((a, b) => a + Number(b), 0);
    // Main's ref files are trusted once they have been still for SETTLE_MS (main-stamp.ts); until then, and once after, the server's
    // credential check asks git for main's tip.
    await sleep(SETTLE_MS + 500);
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    const before = children();
    for (let i = 0; i < 10; i++) expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect(children() - before).toBe(0);
    const two = await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "two\\n"\n' }, 'two');
    const run = await hostCmd(root, 'run', '--once', '--json');
    expect(JSON.parse(run.stdout)).toMatchObject({ outcome: 'applied', commit: two });
    expect(children() - before).toBeGreaterThan(0); // the fetch and the report push went to git
    expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(two);
  } finally {
    await fleet.close();
  }
});
