/**
 * Trust, end to end: hosts apply only commits signed by a key the fleet trusts and never go
 * backwards; the keys change only through a commit a trusted key signed; `git verify-commit`
 * with the fleet's allowed_signers agrees with the host. Real git http-backend behind the built
 * `mesh-cli serve`, real git binary and ssh-keygen, the built mesh-host on simulated machines.
 * The embedded server's credentials and ref permissions, the report hash chain as status
 * checks it, and declarations that try to leave the root are here too.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { shaCryptMatches } from '../core/access/sha-crypt.js';
import { verifyCommit } from '../core/trust/check.js';
import { keysOfLines } from '../core/trust/state.js';
import { cli, createFleet, git, gitIn, hostCmd, runProgram, signingKey, startServer, type TestFleet } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';

const host = async (root: string, ...args: string[]) => {
  const r = await hostCmd(root, ...args, '--json');
  return { ...r, body: r.stdout.startsWith('{') ? JSON.parse(r.stdout) : null };
};
const motd = (text: string) => ({ 'nodes/web-1/base.yaml': `resources:\n  - type: file\n    path: /etc/motd\n    content: "${text}\\n"\n` });

/** Write `files`, commit with extra git options (another signing key, or none) and push; returns the commit. */
async function commitWith(fleet: TestFleet, files: Record<string, string>, message: string, gitOpts: string[]): Promise<string> {
  for (const [path, text] of Object.entries(files)) writeFileSync(join(fleet.checkout, path), text);
  await git(fleet.checkout, 'add', '-A');
  await git(fleet.checkout, ...gitOpts, 'commit', '--quiet', '--allow-empty', '-m', message);
  await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'HEAD:main');
  return git(fleet.checkout, 'rev-parse', 'HEAD');
}
/** The format of a report index's text (format 4: three JSON lines; formats 1-3 of earlier mesh-cli versions are rebuilt). */
const formatOf = (text: string): unknown => (JSON.parse(text.split('\n')[0]!) as { format: unknown }).format;
type Tip = { commit: string } & Record<string, unknown>;
/** A format-4 index (tips, records, reports) as its parts. */
function partsOf(text: string): { vouched: string[]; nodes: Record<string, { tip: Tip }>; reports: Record<string, unknown> } {
  const [head, records, reports] = text.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(head!.format).toBe(4);
  return { vouched: head!.vouched as string[], nodes: records!.nodes as Record<string, { tip: Tip }>, reports: reports! };
}
/** A format-4 index as the format-2 object an earlier mesh-cli wrote (each report inside its record). */
function asFormat2(text: string): { format: 2; vouched: string[]; nodes: Record<string, { tip: Tip }> } {
  const { vouched, nodes, reports } = partsOf(text);
  for (const [node, record] of Object.entries(nodes)) record.tip.report = reports[node];
  return { format: 2, vouched, nodes };
}
/** A format-4 index as the two lines of format 3 (records with format and vouches, then reports). */
function asFormat3(text: string): string {
  const { vouched, nodes, reports } = partsOf(text);
  return `${JSON.stringify({ format: 3, vouched, nodes })}\n${JSON.stringify(reports)}\n`;
}
const unsigned = ['-c', 'commit.gpgsign=false'];
const signedBy = (key: string) => ['-c', `user.signingkey=${key}`];
const fingerprintOf = (key: string) => execFileSync('ssh-keygen', ['-lf', `${key}.pub`], { encoding: 'utf8' }).split(' ')[1]!;
const publicKey = (key: string) => readFileSync(`${key}.pub`, 'utf8').split(' ').slice(0, 2).join(' ');

/** mesh.yaml of the checkout with `change` applied. */
function meshYaml(fleet: TestFleet, change: (m: { trust: string; signers: Array<{ name: string; key: string }> }) => void): Record<string, string> {
  const m = parse(readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8'));
  change(m);
  return { 'mesh.yaml': stringify(m) };
}

describe('hosts apply only signed declarations, and never go backwards', () => {
  let fleet: TestFleet;
  let root: string;
  let mallory: string;
  const c: Record<string, string> = {};
  let good: Record<string, string>;

  beforeAll(async () => {
    fleet = await createFleet();
    root = await fleet.enrol('web-1');
    mallory = signingKey(join(fleet.dir, 'mallory_ed25519'), 'mallory');
  });
  afterAll(async () => fleet?.close());

  it("a commit signed by the fleet's key is applied, and the report names its signer", async () => {
    c.one = await fleet.commit(motd('one'), 'web-1: one');
    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(run.body).toMatchObject({ outcome: 'applied', commit: c.one, trust: 'signed', lastApplied: c.one, signer: { fingerprint: fingerprintOf(fleet.signingKey), name: 'test@localhost' } });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('one\n');
    good = snapshot(root);
  });

  it('an unsigned commit is refused as untrusted; the machine keeps its last good state, drift still corrected', async () => {
    c.unsigned = await commitWith(fleet, motd('unsigned'), 'unsigned', unsigned);
    const run = await host(root, 'run', '--once');
    expect(run.code).toBe(1);
    expect(run.body).toMatchObject({ outcome: 'untrusted', commit: c.unsigned, signer: null, lastApplied: c.one, trust: 'signed' });
    expect(run.body.errors[0]).toEqual({ code: 'E_UNSIGNED', message: `main's tip ${c.unsigned!.slice(0, 12)} is not applied: it is not signed` });
    expect(snapshot(root)).toEqual(good);
    const status = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout);
    expect(status.nodes[0]).toMatchObject({ node: 'web-1', outcome: 'untrusted', commit: c.unsigned, lastApplied: c.one, signature: 'valid', chain: 'ok' });
    expect(status.summary).toContain(`0 at main's tip (${c.unsigned!.slice(0, 12)}); 1 refused main's tip (not signed by a trusted key)`);
    // The table's commit is the one the node still enforces; the one it refused is in its outcome, and why on the line below.
    const table = (await cli(fleet.checkout, 'status')).stdout;
    expect(table).toMatch(new RegExp(`^web-1 .* ${c.one!.slice(0, 12)} +untrusted: refused ${c.unsigned!.slice(0, 12)} +`, 'm'));
    expect(table).toContain(`web-1: main's tip ${c.unsigned!.slice(0, 12)} is not applied: it is not signed`);

    writeFileSync(join(root, 'etc/motd'), 'tampered\n');
    const again = await host(root, 'run', '--once');
    expect(again.body).toMatchObject({ outcome: 'untrusted', resources: [{ id: 'file:/etc/motd', result: 'updated', drift: true }] });
    expect(snapshot(root)).toEqual(good);
  });

  it('a commit signed by a key the fleet does not trust is refused, and the report names that key', async () => {
    c.mallory = await commitWith(fleet, motd('mallory'), 'mallory', signedBy(mallory));
    const run = await host(root, 'run', '--once');
    expect(run.code).toBe(1);
    expect(run.body).toMatchObject({ outcome: 'untrusted', commit: c.mallory, lastApplied: c.one, signer: { fingerprint: fingerprintOf(mallory), name: null } });
    expect(run.body.errors[0]).toEqual({ code: 'E_UNTRUSTED_SIGNER', message: `main's tip ${c.mallory!.slice(0, 12)} is not applied: it is signed by ${fingerprintOf(mallory)}, which is not a trusted signer of this fleet` });
    expect(snapshot(root)).toEqual(good);
  });

  it("git verify-commit with the fleet's allowed_signers agrees with the host on which commits are trusted", async () => {
    const signers = parse(readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8')).signers as Array<{ name: string; key: string }>;
    const allowed = join(fleet.dir, 'allowed_signers');
    writeFileSync(allowed, signers.map((s) => `${s.name} namespaces="git" ${s.key}\n`).join(''));
    const raw = execFileSync('git', ['cat-file', 'commit', c.one!], { cwd: fleet.checkout });
    writeFileSync(join(fleet.dir, 'forged'), Buffer.from(raw.toString('latin1').replace('web-1: one', 'web-1: 0ne'), 'latin1'));
    const forged = await git(fleet.checkout, 'hash-object', '-t', 'commit', '-w', join(fleet.dir, 'forged'));
    const keys = keysOfLines(signers.map((s) => `${s.key} ${s.name}`));
    const verdicts: Record<string, [boolean, boolean]> = {};
    for (const [name, oid] of Object.entries({ ...c, forged })) {
      const byGit = await gitIn(fleet.checkout, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'verify-commit', oid);
      verdicts[name] = [byGit.code === 0, verifyCommit(execFileSync('git', ['cat-file', 'commit', oid], { cwd: fleet.checkout }), keys).ok];
    }
    expect(verdicts).toEqual({ one: [true, true], unsigned: [false, false], mallory: [false, false], forged: [false, false] });
  });

  it('a signed commit on top of the refused ones is applied', async () => {
    c.four = await fleet.commit(motd('four'), 'web-1: four');
    const run = await host(root, 'run', '--once');
    expect(run.body).toMatchObject({ outcome: 'applied', commit: c.four, lastApplied: c.four });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('four\n');
    good = snapshot(root);
  });

  it('a force-pushed older main is refused as a rollback, with the machine unchanged', async () => {
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', `${c.one}:main`);
    const run = await host(root, 'run', '--once');
    expect(run.code).toBe(1);
    expect(run.body).toMatchObject({ outcome: 'untrusted', commit: c.one, lastApplied: c.four, errors: [{ code: 'E_ROLLBACK' }] });
    expect(run.body.errors[0].message).toMatch(new RegExp(`^rollback refused: main's tip ${c.one!.slice(0, 12)} does not descend from ${c.four!.slice(0, 12)}, the last commit this host applied`));
    expect(snapshot(root)).toEqual(good);
  });

  it('a rollback marker signed by a trusted key lets the operator go back; an unsigned one does not', async () => {
    await git(fleet.checkout, 'reset', '--quiet', '--hard', c.one!);
    const marker = ['-m', `Mesh-Allow-Rollback: ${c.four}`];
    await git(fleet.checkout, ...unsigned, 'commit', '--quiet', '--allow-empty', '-m', 'roll back to one', ...marker);
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'HEAD:main');
    const refused = await host(root, 'run', '--once');
    expect(refused.body).toMatchObject({ outcome: 'untrusted', errors: [{ code: 'E_ROLLBACK' }] });
    expect(refused.body.errors[0].message).toContain('its Mesh-Allow-Rollback marker does not count because it is not signed');
    expect(snapshot(root)).toEqual(good);

    await git(fleet.checkout, 'reset', '--quiet', '--hard', c.one!);
    await git(fleet.checkout, 'commit', '--quiet', '--allow-empty', '-m', 'roll back to one', ...marker);
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'HEAD:main');
    const back = await host(root, 'run', '--once');
    expect(back.code, back.stderr).toBe(0);
    expect(back.body).toMatchObject({ outcome: 'applied', lastApplied: await git(fleet.checkout, 'rev-parse', 'HEAD') });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('one\n');
  });

  it("an 'any' marker rolls a host back once; replayed by the server after the host moved on, it is refused", async () => {
    const six = await fleet.commit(motd('six'), 'web-1: six');
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', lastApplied: six });
    // The operator goes back to 'one' on every host at once, with a signed marker that names no anchor.
    await git(fleet.checkout, 'reset', '--quiet', '--hard', c.one!);
    await git(fleet.checkout, 'commit', '--quiet', '--allow-empty', '-m', 'roll back to one', '-m', 'Mesh-Allow-Rollback: any');
    const any = await git(fleet.checkout, 'rev-parse', 'HEAD');
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'HEAD:main');
    const back = await host(root, 'run', '--once');
    expect(back.body, back.stderr).toMatchObject({ outcome: 'applied', lastApplied: any });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('one\n');
    // The fleet moves on (a commit time is in seconds: the host takes 'seven' in a later second than the marker's).
    await sleep(1100);
    const seven = await fleet.commit(motd('seven'), 'web-1: seven');
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', lastApplied: seven });
    const moved = snapshot(root);
    // A server that replays the old marker as main's tip cannot take the host back with it.
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', `${any}:main`);
    const replayed = await host(root, 'run', '--once');
    expect(replayed.body).toMatchObject({ outcome: 'untrusted', commit: any, lastApplied: seven, errors: [{ code: 'E_ROLLBACK' }] });
    expect(replayed.body.errors[0].message).toContain(`its 'Mesh-Allow-Rollback: any' marker does not count because it was committed before this host applied ${seven!.slice(0, 12)}`);
    expect(snapshot(root)).toEqual(moved);
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', `${seven}:main`);
  });

  it('a host whose whole state folder was lost still refuses to go back: re-enrolment takes the anchor from its last report', async () => {
    c.five = await fleet.commit(motd('five'), 'web-1: five');
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', lastApplied: c.five });
    rmSync(join(root, 'var/lib/mesh-host'), { recursive: true });
    const token = join(fleet.dir, 'web-1-again.token');
    expect((await cli(fleet.checkout, 'token', 'issue', 'web-1', '--out', token)).code).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    const enrolled = await host(root, 'enrol', '--token-file', token);
    expect(enrolled.code, enrolled.stderr).toBe(0);
    const before = snapshot(root);
    // main as it was before 'five', signed, with the node's new identity (so the server still lets the node in).
    await git(fleet.checkout, 'checkout', '--quiet', '-b', 'older', `${c.five}^`);
    await git(fleet.checkout, 'checkout', 'main', '--', 'nodes/web-1/node.yaml');
    const older = await commitWith(fleet, {}, 'main before five', []);
    const run = await host(root, 'run', '--once');
    expect(run.body, run.stderr).toMatchObject({ outcome: 'untrusted', commit: older, lastApplied: c.five, errors: [{ code: 'E_ROLLBACK' }] });
    expect(snapshot(root)).toEqual(before);
    await git(fleet.checkout, 'checkout', '--quiet', 'main');
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'main');
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: await git(fleet.checkout, 'rev-parse', 'HEAD') });
  });
});

describe('who may sign changes only through a commit a trusted key signed', () => {
  let fleet: TestFleet;
  let root: string;
  let bob: string;
  let carol: string;

  beforeAll(async () => {
    fleet = await createFleet();
    root = await fleet.enrol('web-1');
    bob = signingKey(join(fleet.dir, 'bob_ed25519'), 'bob');
    carol = signingKey(join(fleet.dir, 'carol_ed25519'), 'carol');
  });
  afterAll(async () => fleet?.close());

  const addBob = (m: { signers: Array<{ name: string; key: string }> }) => void m.signers.push({ name: 'bob', key: publicKey(bob) });

  it('a commit adding a key is honoured only when a trusted key signed it', async () => {
    const selfSigned = await commitWith(fleet, meshYaml(fleet, addBob), 'trust bob (signed by bob)', signedBy(bob));
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'untrusted', commit: selfSigned, errors: [{ code: 'E_UNTRUSTED_SIGNER' }] });
    const vouched = await commitWith(fleet, {}, 'trust bob (signed by the operator)', []);
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: vouched });
    const byBob = await commitWith(fleet, motd('bob'), 'bob: motd', signedBy(bob));
    const run = await host(root, 'run', '--once');
    expect(run.body).toMatchObject({ outcome: 'applied', commit: byBob, signer: { fingerprint: fingerprintOf(bob), name: 'bob' } });
  });

  it('a host that missed a key rotation follows it through the signed history', async () => {
    await commitWith(fleet, meshYaml(fleet, (m) => void (m.signers = [{ name: 'carol', key: publicKey(carol) }])), 'only carol (signed by bob)', signedBy(bob));
    const byCarol = await commitWith(fleet, motd('carol'), 'carol: motd', signedBy(carol));
    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(run.body).toMatchObject({ outcome: 'applied', commit: byCarol, signer: { name: 'carol' } });
    const byBob = await commitWith(fleet, motd('bob again'), 'bob is no longer trusted', signedBy(bob));
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'untrusted', commit: byBob });
  });

  it('a signed commit whose mesh.yaml garbles the only key, or lists none, applies nothing, and the fleet takes the fix signed by that key', async () => {
    const before = readFileSync(join(root, 'etc/motd'), 'utf8');
    const cut = publicKey(carol).slice(0, -4);
    const garbled = await commitWith(fleet, { ...meshYaml(fleet, (m) => void (m.signers = [{ name: 'carol', key: cut }])), ...motd('garbled') }, 'carol, cut short', signedBy(carol));
    const line = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8').split('\n').findIndex((l) => /^\s*key:/.test(l)) + 1;
    const validate = await cli(fleet.checkout, 'validate', '--no-fetch');
    expect(validate.code).toBe(1);
    expect(validate.stdout).toContain(`mesh.yaml:${line}:10: signers.0.key: is not a whole ed25519 key`);
    const noop = await hostCmd(root, 'run', '--once', '--noop');
    expect(noop.code).toBe(1);
    expect(noop.stdout + noop.stderr).toContain(`mesh.yaml:${line}:`);
    const run = await host(root, 'run', '--once');
    expect(run.code).toBe(1);
    expect(run.body).toMatchObject({ outcome: 'failed', commit: garbled, signer: { name: 'carol' } });
    expect(run.body.errors.map((e: { code: string; line?: number; message: string }) => [e.code, e.line ?? null, e.message])).toEqual([
      ['E_INVALID', line, 'signers.0.key: is not a whole ed25519 key: its base64 does not decode to one (garbled or cut short): copy the whole line of the .pub file again'],
      ['E_KEPT_LAST_GOOD', null, expect.stringContaining(`${garbled.slice(0, 12)} does not validate`)],
    ]);
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe(before);
    // No signer at all, under trust: signed, is the same dead end, refused the same way.
    const none = await commitWith(fleet, { ...meshYaml(fleet, (m) => void (m.signers = [])), ...motd('nobody') }, 'no signer left', signedBy(carol));
    const empty = await host(root, 'run', '--once');
    expect(empty.body).toMatchObject({ outcome: 'failed', commit: none, errors: [{ code: 'E_INVALID', file: 'mesh.yaml', message: expect.stringContaining("trust is 'signed' (the default) and no signer is listed") }, { code: 'E_KEPT_LAST_GOOD' }] });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe(before);
    const fixed = await commitWith(fleet, { ...meshYaml(fleet, (m) => void (m.signers = [{ name: 'carol', key: publicKey(carol) }])), ...motd('fixed') }, 'carol, whole again', signedBy(carol));
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: fixed, signer: { name: 'carol' } });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('fixed\n');
  });

  it('trust: none takes effect only from a trusted commit, and status then says so on every line', async () => {
    const none = meshYaml(fleet, (m) => void (m.trust = 'none'));
    const sneaky = await commitWith(fleet, none, 'trust none (unsigned)', unsigned);
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'untrusted', commit: sneaky, errors: [{ code: 'E_UNSIGNED' }] });
    const off = await commitWith(fleet, none, 'trust none (signed by carol)', signedBy(carol));
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: off, trust: 'none' });
    const loose = await commitWith(fleet, motd('anyone'), 'unsigned, and applied', unsigned);
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: loose, trust: 'none', signer: null });
    const status = await cli(fleet.checkout, 'status');
    const rows = status.stdout.split('\n').filter((l) => l.startsWith('web-1 '));
    expect(rows.length).toBe(1);
    for (const line of rows) expect(line).toMatch(/\(trust: none: commit signatures are not checked\)$/);
    expect(JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0]).toMatchObject({ trust: 'none', signer: null });
  });
});

describe("the embedded server: each node may push only its own reports", () => {
  let fleet: TestFleet;
  let web1: string;
  let web2: string;
  const noPrompt = { GIT_TERMINAL_PROMPT: '0' };
  const credentialOf = (root: string) => JSON.parse(readFileSync(join(root, 'etc/mesh-host/credential.json'), 'utf8')) as { username: string; password: string };
  const urlAs = (user: string, password: string) => fleet.plainUrl.replace('://', `://${user}:${password}@`);

  beforeAll(async () => {
    fleet = await createFleet();
    web1 = await fleet.enrol('web-1');
    web2 = await fleet.enrol('web-2');
    await fleet.commit({ ...motd('one'), 'nodes/web-2/base.yaml': 'resources: []\n' }, 'base');
    for (const root of [web1, web2]) expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
  });
  afterAll(async () => fleet?.close());

  it("a node's credential reads main and its own report branch and sees no other node's; only its hash is on main", async () => {
    const cred = credentialOf(web1);
    expect(statSync(join(web1, 'etc/mesh-host/credential.json')).mode & 0o777).toBe(0o600);
    expect(cred.username).toBe('web-1');
    const refs = await runProgram('git', ['ls-remote', urlAs('web-1', cred.password)], fleet.dir, noPrompt);
    expect(refs.code, refs.stderr).toBe(0);
    expect(refs.stdout.split('\n').filter(Boolean).map((l) => l.split('\t')[1])).toEqual(['HEAD', 'refs/heads/main', 'refs/heads/reports/web-1']);
    const identity = parse(await git(fleet.checkout, 'show', 'origin/main:nodes/web-1/node.yaml'));
    expect(identity.credential).toEqual({ sha256: createHash('sha256').update(cred.password).digest('hex'), crypt: expect.stringMatching(/^\$5\$rounds=1000\$/) });
    expect(shaCryptMatches(cred.password, identity.credential.crypt)).toBe(true);
    expect((await runProgram('git', ['log', '-p', '--all'], fleet.checkout)).stdout).not.toContain(cred.password);
  });

  it("a node's credential cannot push main, another node's report branch or a tag, nor delete its own branch", async () => {
    const url = urlAs('web-1', credentialOf(web1).password);
    const work = join(fleet.dir, 'web-1-work');
    await git(fleet.dir, 'clone', '--quiet', url, work);
    await git(work, '-c', 'user.name=x', '-c', 'user.email=x@x', '-c', 'commit.gpgsign=false', 'commit', '--quiet', '--allow-empty', '-m', 'not yours');
    const before = await git(fleet.checkout, 'ls-remote', 'origin');
    const push = (...refspec: string[]) => runProgram('git', ['push', '--force', 'origin', ...refspec], work, noPrompt);
    const main = await push('HEAD:refs/heads/main');
    expect(main.code).not.toBe(0);
    expect(main.stderr).toContain('mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/main');
    expect((await push('HEAD:refs/heads/reports/web-2')).code).not.toBe(0);
    const tag = await push('HEAD:refs/tags/v1');
    expect(tag.stderr).toContain('may push only refs/heads/reports/web-1, not refs/tags/v1');
    const del = await push(':refs/heads/reports/web-1');
    expect(del.stderr).toContain('mesh: node web-1 may not delete its report branch');
    const dropMain = await runProgram('git', ['push', 'origin', ':refs/heads/main'], fleet.checkout, noPrompt);
    expect(dropMain.stderr).toContain("mesh: refs/heads/main is the fleet's main branch; it cannot be deleted");
    expect(await git(fleet.checkout, 'ls-remote', 'origin')).toBe(before);
    // Its own branch it may rewrite (a heartbeat replaces the heartbeat before it).
    expect((await push('HEAD:refs/heads/reports/web-1')).code).toBe(0);
  });

  it('a wrong password and no credential are refused, and no credential reaches the server log', async () => {
    for (const url of [urlAs('web-1', 'guess'), fleet.plainUrl, urlAs('operator', 'guess')]) {
      const r = await runProgram('git', ['ls-remote', url], fleet.dir, noPrompt);
      expect(r.code, url).not.toBe(0);
    }
    // The request log: one JSON line per request (serve's own notice at its first start shows the operator credential once, by design).
    const log = fleet.server.stderr().split('\n').filter((l) => l.startsWith('{')).join('\n');
    expect(log).toContain('"user":"web-1"');
    expect(log).toContain('"user":"operator"');
    for (const secret of [credentialOf(web1).password, credentialOf(web2).password, fleet.operator]) expect(log).not.toContain(secret);
  });

  it("a revoked node's credential is refused at once, and its host stops", async () => {
    const url = urlAs('web-2', credentialOf(web2).password);
    expect((await runProgram('git', ['ls-remote', url], fleet.dir, noPrompt)).code).toBe(0);
    const revoked = await cli(fleet.checkout, 'revoke', 'web-2');
    expect(revoked.stdout).toContain('mesh-cli serve refuses it at once, as soon as this commit is pushed');
    await git(fleet.checkout, 'push', '--quiet');
    const refused = await runProgram('git', ['ls-remote', url], fleet.dir, noPrompt);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Authentication failed|401/);
    const before = snapshot(web2);
    const run = await hostCmd(web2, 'run', '--once');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('the fleet server refused the git credential of web-2 (HTTP 401): its identity was revoked');
    expect(snapshot(web2)).toEqual(before);
  });

  it('serve makes one operator credential at its first start and keeps only its hash; --open says it is open', async () => {
    const data = join(fleet.dir, 'data2');
    mkdirSync(data);
    const first = await startServer(data, 0, { auth: true });
    await first.stop();
    const file = readFileSync(join(data, 'operators'), 'utf8');
    expect(statSync(join(data, 'operators')).mode & 0o777).toBe(0o600);
    expect(file).toContain(`operator:${createHash('sha256').update(first.operator!).digest('hex')}\n`);
    expect(file).not.toContain(first.operator!);
    expect(first.stderr()).toMatch(/created .*operators with one operator credential/);
    const again = await startServer(data);
    await again.stop();
    expect(again.operator).toBeUndefined();
    expect(readFileSync(join(data, 'operators'), 'utf8')).toBe(file);
    // A line that names no operator (a password written instead of its hash) is said in the log with its place, at the first sign-in after it was written.
    writeFileSync(join(data, 'operators'), `${file}alice:hunter2\n`);
    execFileSync('git', ['init', '--quiet', '--bare', join(data, 'fleet.git')]);
    const edited = await startServer(data);
    const signIn = await fetch(`${edited.url}fleet.git/info/refs?service=git-upload-pack`, { headers: { Authorization: `Basic ${Buffer.from('alice:hunter2').toString('base64')}` } });
    await signIn.arrayBuffer();
    await edited.stop();
    expect(signIn.status).toBe(401);
    const warned = edited.stderr().split('\n').filter((l) => l.includes('is ignored')).map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(warned).toEqual([expect.objectContaining({ level: 40, msg: expect.stringContaining(`the operators file's line ${join(data, 'operators')}:3 is ignored: not NAME:SHA256`) })]);
    const open = await startServer(mkdtempSync(join(fleet.dir, 'open-')));
    await open.stop();
    expect(open.stderr()).toContain('--open: no authentication');
  });
});

describe('reports are a hash chain', () => {
  let fleet: TestFleet;
  let root: string;
  let third: string;
  const row = async (checkout: string) => JSON.parse((await cli(checkout, 'status', '--json')).stdout).nodes.find((n: { node: string }) => n.node === 'web-1');

  beforeAll(async () => {
    fleet = await createFleet();
    root = await fleet.enrol('web-1');
    for (const text of ['one', 'two']) {
      await fleet.commit(motd(text), text);
      expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    }
  });
  afterAll(async () => fleet?.close());

  it('a replayed old report is flagged by mesh-cli status', async () => {
    expect(await row(fleet.checkout)).toMatchObject({ sequence: 3, chain: 'ok', signature: 'valid' });
    // status keeps no ref per report branch (its report index does): fetch the branch to rewind it.
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    third = await git(fleet.checkout, 'rev-parse', 'origin/reports/web-1');
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'origin/reports/web-1~1:refs/heads/reports/web-1');
    expect(await row(fleet.checkout)).toMatchObject({ sequence: 2, chain: 'replayed', signature: 'valid' });
    const table = await cli(fleet.checkout, 'status');
    expect(table.stdout).toMatch(/^web-1 .* valid, chain replayed$/m);
    expect(table.stdout).toContain('web-1: chain replayed: the last report is older than one status has already seen');
  });

  it('a report branch rewritten under status is flagged as forked, and a report out of order as reordered', async () => {
    // Report #3 again, but on top of report #1: its chain names #2, which is no longer below it.
    const first = await git(fleet.checkout, 'rev-list', '--max-parents=0', 'origin/reports/web-1');
    const spliced = await git(fleet.checkout, 'commit-tree', '--no-gpg-sign', `${third}^{tree}`, '-p', first, '-m', 'report web-1 #3 again');
    await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', `${spliced}:refs/heads/reports/web-1`);
    expect(await row(fleet.checkout)).toMatchObject({ sequence: 3, chain: 'forked', signature: 'valid' });
    const fresh = join(fleet.dir, 'fresh');
    await git(fleet.dir, 'clone', '--quiet', fleet.repoUrl, fresh);
    expect(await row(fresh)).toMatchObject({ sequence: 3, chain: 'reordered', signature: 'valid' });
  });

  it('a damaged report index is rebuilt from origin, and status says so', async () => {
    writeFileSync(join(fleet.checkout, '.git/mesh/reports.json'), '{"format": 1, "nodes": ');
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(1); // web-1's report chain was forked above
    expect(r.stderr).toContain('could not be read; it is rebuilt from origin');
    expect(JSON.parse(r.stdout).nodes[0]).toMatchObject({ node: 'web-1', sequence: 3, signature: 'valid' });
  });

  it('a damaged line of records in the index (read after the first fetch is out) is rebuilt from origin, and status says so', async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const before = await row(fleet.checkout);
    const [head, , reports] = readFileSync(join(mesh, 'reports.json'), 'utf8').split('\n');
    writeFileSync(join(mesh, 'reports.json'), `${head}\n{"nodes": {"web-1": \n${reports}\n`);
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(1); // web-1's report chain was forked above
    expect(r.stderr.match(/could not be read; it is rebuilt from origin/g)).toHaveLength(1);
    expect(JSON.parse(r.stdout).nodes[0]).toEqual(before);
    // The rebuilt index keeps the vouches this run checked again, so the next run need not.
    const vouched = (text: string) => (JSON.parse(text.split('\n')[0]!) as { vouched: string[] }).vouched.sort();
    expect(vouched(readFileSync(join(mesh, 'reports.json'), 'utf8'))).toEqual(vouched(head!));
    expect(await row(fleet.checkout)).toEqual(before);
    // Records that parse but do not match the first line's tips are damage too.
    const [head2, records2, reports2] = readFileSync(join(mesh, 'reports.json'), 'utf8').split('\n');
    const records = JSON.parse(records2!);
    records.nodes['web-1'].tip.commit = '0'.repeat(40);
    writeFileSync(join(mesh, 'reports.json'), `${head2}\n${JSON.stringify(records)}\n${reports2}\n`);
    const again = await cli(fleet.checkout, 'status', '--json');
    expect(again.code, again.stderr).toBe(1); // web-1's report chain was forked above
    expect(again.stderr.match(/could not be read; it is rebuilt from origin/g)).toHaveLength(1);
    expect(JSON.parse(again.stdout).nodes[0]).toEqual(before);
  });

  it("a report another mesh-cli version found invalid (a newer host's it could not parse) is judged again by this one; the same version keeps its verdict", async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    expect(await row(fleet.checkout)).toMatchObject({ sequence: 3, signature: 'valid' });
    const [head, records, reports] = readFileSync(join(mesh, 'reports.json'), 'utf8').split('\n');
    const judged = JSON.parse(records!);
    judged.nodes['web-1'].tip.verdict = { signature: 'invalid', reason: "status.json does not parse: facts: unknown field 'osCodename'" };
    const first = JSON.parse(head!);
    writeFileSync(join(mesh, 'reports.json'), `${head}\n${JSON.stringify(judged)}\n${reports}\n`);
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'invalid', reason: "status.json does not parse: facts: unknown field 'osCodename'" });
    writeFileSync(join(mesh, 'reports.json'), `${JSON.stringify({ ...first, reader: '0.0.9' })}\n${JSON.stringify(judged)}\n${reports}\n`);
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.stderr).toContain('was written by mesh-cli 0.0.9; the report it found invalid is judged again by this one');
    expect(JSON.parse(r.stdout).nodes[0]).toMatchObject({ node: 'web-1', sequence: 3, signature: 'valid' });
    expect(JSON.parse(readFileSync(join(mesh, 'reports.json'), 'utf8').split('\n')[0]!).reader).toBe(first.reader);
  });

  it("an index and parsed node.yaml files another mesh-cli version wrote are written again by this one, even when it found nothing invalid", async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const before = await row(fleet.checkout);
    const index = join(mesh, 'reports.json');
    const [head, records, reports] = readFileSync(index, 'utf8').split('\n');
    const first = JSON.parse(head!);
    writeFileSync(index, `${JSON.stringify({ ...first, reader: '0.0.9' })}\n${records}\n${reports}\n`);
    // That version could not read web-1's node.yaml (a field it did not know, say).
    const kept = JSON.parse(readFileSync(join(mesh, 'identities.json'), 'utf8'));
    expect(kept.reader).toBe(first.reader);
    const blob = Object.keys(kept.identities)[0]!;
    expect(kept.identities[blob]).toMatchObject({ node: 'web-1' });
    writeFileSync(join(mesh, 'identities.json'), JSON.stringify({ reader: '0.0.9', identities: { [blob]: null } }));
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.stderr).not.toContain('judged again');
    expect(JSON.parse(r.stdout).nodes[0]).toEqual(before);
    expect(JSON.parse(readFileSync(index, 'utf8').split('\n')[0]!).reader).toBe(first.reader);
    expect(JSON.parse(readFileSync(join(mesh, 'identities.json'), 'utf8'))).toEqual(kept);
    // This version's own cache is taken as it is.
    writeFileSync(join(mesh, 'identities.json'), JSON.stringify({ reader: first.reader, identities: { [blob]: null } }));
    await cli(fleet.checkout, 'status', '--json');
    expect(JSON.parse(readFileSync(join(mesh, 'identities.json'), 'utf8')).identities[blob]).toBeNull();
    writeFileSync(join(mesh, 'identities.json'), JSON.stringify(kept));
  });

  it('a damaged line of reports in the index is read again from the report texts, and status says so', async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const before = await row(fleet.checkout);
    const [head, records] = readFileSync(join(mesh, 'reports.json'), 'utf8').split('\n');
    writeFileSync(join(mesh, 'reports.json'), `${head}\n${records}\n{"web-1": {"format": 1, \n`);
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(1); // web-1's report chain was forked above
    expect(r.stderr).toContain('could not be read; they are read again from the report texts');
    expect(JSON.parse(r.stdout).nodes[0]).toEqual(before);
    expect(await row(fleet.checkout)).toEqual(before);
  });

  it('an index written by an earlier mesh-cli (format 1, report texts inside it) is rebuilt from origin, and status says so', async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const before = await row(fleet.checkout);
    // Format 1: the index held each report's status.json and signature, and the parsed node.yaml files.
    const v2 = asFormat2(readFileSync(join(mesh, 'reports.json'), 'utf8'));
    const { identities } = JSON.parse(readFileSync(join(mesh, 'identities.json'), 'utf8'));
    const tip = v2.nodes['web-1']!.tip;
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', tip.commit);
    const { report: _view, ...rest } = tip;
    const texts = { status: await git(fleet.checkout, 'show', `${tip.commit}:status.json`), sig: (await git(fleet.checkout, 'show', `${tip.commit}:status.json.sig`)) + '\n' };
    writeFileSync(join(mesh, 'reports.json'), JSON.stringify({ ...v2, format: 1, identities, nodes: { 'web-1': { ...v2.nodes['web-1'], tip: { ...rest, ...texts } } } }));
    rmSync(join(mesh, 'identities.json'));
    rmSync(join(mesh, 'report-texts.bin'));
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(1); // web-1's report chain was forked above
    expect(r.stderr.match(/reports\.json could not be read; it is rebuilt from origin/g)).toHaveLength(1);
    expect(JSON.parse(r.stdout).nodes[0]).toEqual(before);
    expect(formatOf(readFileSync(join(mesh, 'reports.json'), 'utf8'))).toBe(4);
    expect(await row(fleet.checkout)).toEqual(before);
  });

  it('an index written by an earlier mesh-cli (format 2, one JSON object) is rebuilt from origin, and status says so', async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const before = await row(fleet.checkout);
    writeFileSync(join(mesh, 'reports.json'), JSON.stringify(asFormat2(readFileSync(join(mesh, 'reports.json'), 'utf8'))));
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(1); // web-1's report chain was forked above
    expect(r.stderr.match(/reports\.json could not be read; it is rebuilt from origin/g)).toHaveLength(1);
    expect(JSON.parse(r.stdout).nodes[0]).toEqual(before);
    expect(formatOf(readFileSync(join(mesh, 'reports.json'), 'utf8'))).toBe(4);
    // and read back as format 4, with the same row
    expect(await row(fleet.checkout)).toEqual(before);
  });

  it('an index written by an earlier mesh-cli (format 3, records and reports on two lines) is rebuilt from origin, and status says so', async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const before = await row(fleet.checkout);
    const v3 = asFormat3(readFileSync(join(mesh, 'reports.json'), 'utf8'));
    const tip = JSON.parse(v3.split('\n')[0]!).nodes['web-1'].tip.commit;
    writeFileSync(join(mesh, 'reports.json'), v3);
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(1); // web-1's report chain was forked above
    expect(r.stderr.match(/reports\.json could not be read; it is rebuilt from origin/g)).toHaveLength(1);
    expect(JSON.parse(r.stdout).nodes[0]).toEqual(before);
    // rewritten as format 4: the tip first, then the record, then the report
    const text = readFileSync(join(mesh, 'reports.json'), 'utf8');
    expect(JSON.parse(text.split('\n')[0]!).tips).toEqual({ 'web-1': tip });
    expect(partsOf(text).nodes['web-1']!.tip.commit).toBe(tip);
    expect(await row(fleet.checkout)).toEqual(before);
  });

  it('a report is verified again when its node.yaml changes, its text fetched again when the checkout lost it; a node.yaml that does not read is named', async () => {
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'valid' });
    rmSync(join(fleet.checkout, '.git/mesh/report-texts.bin'));
    const identity = readFileSync(join(fleet.checkout, 'nodes/web-1/node.yaml'), 'utf8');
    // The same report, judged against a node.yaml one generation on (its token key for generation 1 not kept).
    await fleet.commit({ 'nodes/web-1/node.yaml': identity.replace(/^generation: 1$/m, 'generation: 2') }, 'web-1: generation 2');
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'revoked', reason: expect.stringContaining('node.yaml is at generation 2') });
    await fleet.commit({ 'nodes/web-1/node.yaml': identity.replace(/^generation: 1$/m, 'generation: one') }, 'web-1: a node.yaml that does not read');
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'invalid', reason: "web-1's node.yaml on main does not read as a node's identity, so nothing vouches for this node: 'mesh-cli validate' names its problem" });
    // The server cannot check the host's credential against it either: the host's refusal says so beside revocation, and the host goes on once it is fixed.
    const refused = await hostCmd(root, 'run', '--once');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("If neither was done, web-1's node.yaml on main may not read");
    await fleet.commit({ 'nodes/web-1/node.yaml': identity }, 'web-1: generation 1 again');
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'valid' });
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
  });

  it("a report text damaged in the checkout is never judged or shown as the node's report: it is fetched again, and status says so", async () => {
    const mesh = join(fleet.checkout, '.git/mesh');
    const texts = join(mesh, 'report-texts.bin');
    /** web-1's kept status.json made to say it failed (still JSON, the same length), as a bad disk or a stray write would. */
    const damage = () => {
      const bytes = readFileSync(texts);
      const at = bytes.indexOf('"outcome": "applied"');
      expect(at).toBeGreaterThan(0);
      bytes.write('"outcome": "failed" ', at);
      writeFileSync(texts, bytes);
    };
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'valid', outcome: 'applied' });
    damage();
    // node.yaml changes (a comment): the report is verified again, from its text fetched again, not from the damaged one.
    const identity = readFileSync(join(fleet.checkout, 'nodes/web-1/node.yaml'), 'utf8');
    await fleet.commit({ 'nodes/web-1/node.yaml': `${identity}# a comment\n` }, 'web-1: a comment');
    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.stderr).toContain(`${texts} held damaged report texts (web-1): they were not used; they were fetched again from the server`);
    expect(JSON.parse(r.stdout).nodes.find((n: { node: string }) => n.node === 'web-1')).toMatchObject({ signature: 'valid', outcome: 'applied' });
    expect(readFileSync(texts).includes('"outcome": "failed" ')).toBe(false);
    // Damaged again, with the index's line of reports damaged too, which status reads again from the texts: offline, the report is
    // shown as not verified rather than as the damaged text says; with the server, it is fetched again and verified in the same run.
    const damageBoth = () => {
      damage();
      const [head, records] = readFileSync(join(mesh, 'reports.json'), 'utf8').split('\n');
      writeFileSync(join(mesh, 'reports.json'), `${head}\n${records}\n{"web-1": \n`);
    };
    damageBoth();
    const offline = await cli(fleet.checkout, 'status', '--json', '--no-fetch');
    expect(offline.stderr).toContain(`${texts} held damaged report texts (web-1): they were not used; those not fetched again show as not verified until a status run with the server reachable fetches them`);
    expect(JSON.parse(offline.stdout).nodes.find((n: { node: string }) => n.node === 'web-1')).toMatchObject({ signature: 'missing', outcome: null, reason: 'the report index was damaged and this report is not in the checkout: run status again with the server reachable' });
    expect(await row(fleet.checkout)).toMatchObject({ signature: 'valid', outcome: 'applied' });
    damageBoth();
    const online = await cli(fleet.checkout, 'status', '--json');
    expect(online.stderr).toContain('held damaged report texts (web-1): they were not used; they were fetched again from the server');
    expect(JSON.parse(online.stdout).nodes.find((n: { node: string }) => n.node === 'web-1')).toMatchObject({ signature: 'valid', outcome: 'applied' });
  });
});

describe('status after reports it has not seen', () => {
  let fleet: TestFleet;
  let root: string;
  afterAll(async () => fleet?.close());

  it('two reports since the last run: the chain is checked across the one status skipped, and holds', async () => {
    fleet = await createFleet();
    root = await fleet.enrol('web-1');
    const row = async () => JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes.find((n: { node: string }) => n.node === 'web-1');
    await fleet.commit(motd('one'), 'one');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    const seen = await row();
    expect(seen).toMatchObject({ chain: 'ok', signature: 'valid' });
    for (const text of ['two', 'three']) {
      await fleet.commit(motd(text), text);
      expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    }
    expect(await row()).toMatchObject({ chain: 'ok', signature: 'valid', sequence: seen.sequence + 2 });
  });
});

describe('hostile declarations cannot leave the root', () => {
  let fleet: TestFleet;
  let root: string;
  let outside: string;

  beforeAll(async () => {
    fleet = await createFleet();
    root = await fleet.enrol('web-1');
    outside = mkdtempSync(join(fleet.dir, 'outside-'));
    writeFileSync(join(outside, 'motd'), 'not yours\n');
  });
  afterAll(async () => fleet?.close());

  it('a symlink planted in the root is never written through', async () => {
    symlinkSync(outside, join(root, 'etc/app'));
    symlinkSync(join(outside, 'motd'), join(root, 'etc/motd'));
    const before = { inside: snapshot(root), outside: snapshot(outside) };
    const file = (path: string) => `  - type: file\n    path: ${path}\n    content: "mesh\\n"\n`;
    await fleet.commit({ 'nodes/web-1/base.yaml': `resources:\n${file('/etc/app/config')}${file('/etc/motd')}  - type: directory\n    path: /etc/app/sub\n` }, 'through symlinks');
    const run = await host(root, 'run', '--once');
    expect(run.code).toBe(1);
    expect(run.body.outcome).toBe('failed');
    const lines = Object.fromEntries(run.body.resources.map((r: { id: string; error?: string }) => [r.id, r.error]));
    expect(lines['file:/etc/app/config']).toBe(`cannot read current state: /etc/app/config: the parent /etc/app is a symlink to ${outside}, and mesh does not write through symlinks: declare it at the path the link leads to, ${outside}/config`);
    expect(lines['file:/etc/motd']).toMatch(/is a symlink, not a file/);
    expect(lines['directory:/etc/app/sub']).toMatch(/the parent \/etc\/app is a symlink/);
    expect({ inside: snapshot(root), outside: snapshot(outside) }).toEqual(before);
  });

  it("a path with '..' and an oversized declaration file are refused with their place, applying nothing", async () => {
    const before = snapshot(root);
    await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/../../outside/motd\n    content: "x"\n' }, 'dot dot');
    const dots = await host(root, 'run', '--once');
    expect(dots.body.errors).toContainEqual(expect.objectContaining({ file: 'nodes/web-1/base.yaml', line: 3, message: expect.stringContaining("must not contain '..'") }));
    await fleet.commit({ 'nodes/web-1/base.yaml': 'resources: []\n', 'nodes/web-1/big.yaml': `# ${'x'.repeat(1024 * 1024)}\nresources: []\n` }, 'big');
    const big = await host(root, 'run', '--once');
    expect(big.body).toMatchObject({ outcome: 'failed', errors: [{ file: 'nodes/web-1/big.yaml', line: 1, col: 1, message: 'file is larger than 1048576 bytes; split it' }] });
    expect(snapshot(root)).toEqual(before);
    expect(snapshot(outside)).toEqual({ motd: expect.any(String) });
  });
});
