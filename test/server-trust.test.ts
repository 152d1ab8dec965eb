/**
 * The fleet server's own trust, end to end on the built `mesh-cli serve` and `mesh-host`: node
 * identities come only from a main that passes the hosts' signature check, a token enrols one
 * machine once whatever its report branch says, a token whose signer key was changed is refused
 * at enrolment, reserved node names are refused at `token issue`, and a node's push is capped.
 * Each attack is made as issue 18 describes it: with the operator's git credential alone (no
 * signing key), or with the node credential a token carries.
 */
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { cli, createFleet, git, gitIn, hostCmd, MESH_CLI, newMachine, runProgram, signingKey, type TestFleet } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';
import { tokenCheck } from '../core/token-check.js';
import { TokenFile } from '../schema/token.js';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const as = (name: string) => ['-c', `user.name=${name}`, '-c', `user.email=${name}@example.org`];
const unsigned = [...as('mallory'), '-c', 'commit.gpgsign=false'];
const tempDir = tempDirs();

let fleet: TestFleet;
let attacker: string;
let mallory: string;

beforeAll(async () => {
  fleet = await createFleet();
  mallory = signingKey(join(fleet.dir, 'mallory_ed25519'), 'mallory');
  // The attacker has the operator's git credential, and no key the fleet trusts.
  attacker = join(fleet.dir, 'attacker');
  await git(fleet.dir, 'clone', '--quiet', fleet.repoUrl, attacker);
});
afterAll(async () => fleet?.close());

/** HTTP status of a fetch's first request as `user` with `password`. */
async function asNode(user: string, password: string): Promise<number> {
  const res = await fetch(`${fleet.plainUrl}/info/refs?service=git-upload-pack`, {
    headers: { Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` },
  });
  await res.arrayBuffer();
  return res.status;
}

/** Issue a token for `node` and push it; the token file and the node credential it carries. */
async function issue(node: string): Promise<{ file: string; password: string }> {
  const file = join(fleet.dir, `${node}.token`);
  const issued = await cli(fleet.checkout, 'token', 'issue', node, '--out', file);
  expect(issued.code, issued.stderr).toBe(0);
  await git(fleet.checkout, 'push', '--quiet');
  const token = parse(readFileSync(file, 'utf8').replace(/^#.*\n/gm, '')) as { credential: { password: string } };
  return { file, password: token.credential.password };
}

/** A new simulated machine that `mesh-host enrol` accepts as eligible. */
function machine(name: string): string {
  const root = newMachine(join(fleet.dir, 'machines', name));
  mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
  writeFileSync(join(root, 'var/lib/dpkg/status'), '');
  return root;
}

/** In the attacker's clone: main as the server has it, `change` applied to a node's node.yaml, committed with `opts` and pushed. */
async function attackNodeYaml(node: string, change: (identity: Record<string, unknown>) => void, opts: string[]): Promise<void> {
  await git(attacker, 'fetch', '--quiet', 'origin');
  await git(attacker, 'reset', '--quiet', '--hard', 'origin/main');
  const file = join(attacker, 'nodes', node, 'node.yaml');
  const identity = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  change(identity);
  writeFileSync(file, stringify(identity));
  await git(attacker, ...opts, 'commit', '--quiet', '-am', `${node}: a credential of mine`);
  await git(attacker, 'push', '--quiet', 'origin', 'HEAD:main');
}

/** Put main back to the operator checkout's HEAD (signed), over whatever the attacker pushed. */
async function restoreMain(): Promise<void> {
  await git(fleet.checkout, 'push', '--quiet', '--force', 'origin', 'HEAD:main');
}

describe('the server takes node identities only from a main that passes the hosts\' trust check', { timeout: 120_000 }, () => {
  let web1: { file: string; password: string };
  let root: string;

  beforeAll(async () => {
    web1 = await issue('web-1');
    root = machine('web-1');
    const enrolled = await hostCmd(root, 'enrol', '--token-file', web1.file);
    expect(enrolled.code, enrolled.stderr).toBe(0);
  });
  afterEach(restoreMain);

  it('an unsigned push that rewrites node.yaml\'s credential lets no one in and locks no one out', async () => {
    expect([await asNode('web-1', web1.password), await asNode('web-1', 'stolen')]).toEqual([200, 401]);
    await attackNodeYaml('web-1', (id) => { id.credential = { sha256: sha256('stolen') }; }, unsigned);
    expect([await asNode('web-1', web1.password), await asNode('web-1', 'stolen')]).toEqual([200, 401]);
    // The real host still reaches the server: it refuses main's tip as unsigned, and is not told it was revoked.
    const run = await hostCmd(root, 'run', '--once', '--json');
    expect(run.stderr + run.stdout).not.toMatch(/revoked|E_CREDENTIAL_REFUSED/);
    expect((JSON.parse(run.stdout) as { outcome: string }).outcome).toBe('untrusted');
    expect(fleet.server.stderr()).toMatch(/main's tip is not trusted; node identities stay as on the last trusted main: .*not signed/);
  });

  it('a push signed by a key the fleet does not trust changes no credential either', async () => {
    await attackNodeYaml('web-1', (id) => { id.credential = { sha256: sha256('stolen') }; }, [...as('mallory'), '-c', 'gpg.format=ssh', '-c', `user.signingkey=${mallory}`, '-c', 'commit.gpgsign=true']);
    expect([await asNode('web-1', web1.password), await asNode('web-1', 'stolen')]).toEqual([200, 401]);
  });

  it('a force-push of a main from before `revoke` brings no revoked credential back', async () => {
    const web2 = await issue('web-2');
    const before = await git(fleet.checkout, 'rev-parse', 'HEAD');
    expect(await asNode('web-2', web2.password)).toBe(200);
    const revoked = await cli(fleet.checkout, 'revoke', 'web-2');
    expect(revoked.code).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    expect(await asNode('web-2', web2.password)).toBe(401);
    await git(attacker, 'fetch', '--quiet', 'origin');
    await git(attacker, 'push', '--quiet', '--force', 'origin', `${before}:refs/heads/main`);
    expect(await git(fleet.checkout, 'ls-remote', 'origin', 'refs/heads/main')).toMatch(new RegExp(`^${before}`));
    expect(await asNode('web-2', web2.password)).toBe(401);
    // What the server trusts is kept in its data folder, at the last trusted main: the revoke.
    await restoreMain();
    const kept = JSON.parse(readFileSync(join(fleet.server.data, '.mesh-trust', 'fleet.json'), 'utf8')) as { anchor: { commit: string } };
    expect(kept.anchor.commit).toBe(await git(fleet.checkout, 'rev-parse', 'HEAD'));
  });

  it('a damaged record of what the server trusts is an error in its log, names the file and what to do, and loses nothing', async () => {
    const file = join(fleet.server.data, '.mesh-trust', 'fleet.json');
    const record = readFileSync(file, 'utf8');
    writeFileSync(file, record.slice(0, 40));
    try {
      expect(await asNode('web-1', web1.password)).toBe(500);
      const failed = fleet.server.stderr().split('\n').filter((l) => l.includes('"request failed"')).map((l) => JSON.parse(l) as { level: number; message: string });
      expect(failed.at(-1)).toEqual(expect.objectContaining({ level: 50, message: `${file} cannot be read (not JSON): restore it, or move it away to have the server walk main again from its root commit` }));
      expect(readFileSync(file, 'utf8')).toBe(record.slice(0, 40));
    } finally {
      writeFileSync(file, record);
    }
    expect(await asNode('web-1', web1.password)).toBe(200);
  });
});

describe('a token enrols one machine once, recorded where its credential cannot undo it', { timeout: 120_000 }, () => {
  it('a used token copied and replayed after blanking the report branch is refused as "already used"', async () => {
    const web3 = await issue('web-3');
    const copy = `${web3.file}.copy`;
    copyFileSync(web3.file, copy);
    const first = await hostCmd(machine('web-3-a'), 'enrol', '--token-file', web3.file);
    expect(first.code, first.stderr).toBe(0);
    // With the credential the token carries: replace the report branch by an empty commit.
    const blank = join(fleet.dir, 'blank');
    await git(fleet.dir, 'init', '--quiet', blank);
    await git(blank, ...unsigned, 'commit', '--quiet', '--allow-empty', '-m', 'nothing here');
    const asWeb3 = fleet.plainUrl.replace('://', `://web-3:${web3.password}@`);
    await git(blank, 'push', '--quiet', '--force', asWeb3, 'HEAD:refs/heads/reports/web-3');

    const second = machine('web-3-b');
    const replay = await hostCmd(second, 'enrol', '--token-file', copy);
    expect(replay.code).not.toBe(0);
    expect(replay.stderr).toMatch(/the token of web-3 generation 1 was already used to enrol a machine/);
    expect(replay.stderr).toMatch(/issue a new one with 'mesh-cli token issue web-3'/);
    expect(fleet.server.stderr()).toMatch(/mesh: the token of web-3 generation 1 was already used: it enrolled a machine at \d{4}-/);
    expect(existsSync(join(second, 'etc/mesh-host/config.json'))).toBe(false);
    expect(existsSync(join(fleet.server.data, '.mesh-enrolments', 'fleet', 'web-3.1'))).toBe(true);
  });

  it('a token whose signer key had one byte changed is refused at enrolment, and the token stays unused', async () => {
    const web4 = await issue('web-4');
    const text = readFileSync(web4.file, 'utf8');
    const key = /AAAAC3NzaC1lZDI1NTE5[A-Za-z0-9+/]+/.exec(text)![0]; // the signer's ed25519 key (yaml may fold its line)
    const at = key.length - 10;
    const damaged = `${key.slice(0, at)}${key[at] === 'A' ? 'B' : 'A'}${key.slice(at + 1)}`;
    const bad = `${web4.file}.damaged`;
    writeFileSync(bad, text.replace(key, damaged));
    const root = machine('web-4');
    // The token's own check sees the change first.
    const unchecked = await hostCmd(root, 'enrol', '--token-file', bad);
    expect(unchecked.code).toBe(2);
    expect(unchecked.stderr).toContain('was cut short or changed on its way here');
    // It proves nothing about who wrote the token: made to match (as whoever changed the key on purpose would), the signer check refuses it.
    const remade = TokenFile.parse(parse(readFileSync(bad, 'utf8')));
    // Quoted either way: a check of digits only (or digits around one e) reads as a number in YAML, so mesh-cli writes it quoted.
    writeFileSync(bad, readFileSync(bad, 'utf8').replace(/^check: "?[0-9a-f]{16}"?$/m, `check: "${tokenCheck(remade)}"`));
    const refused = await hostCmd(root, 'enrol', '--token-file', bad);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/this token's signer keys do not match the fleet: main's tip [0-9a-f]{12} it is signed by SHA256:\S+, which is not a trusted signer of this fleet/);
    expect(refused.stderr).toMatch(/issue a new token with 'mesh-cli token issue web-4'/);
    const enrolled = await hostCmd(root, 'enrol', '--token-file', web4.file);
    expect(enrolled.code, enrolled.stderr).toBe(0);
  });
});

describe('token issue refuses reserved node names', { timeout: 60_000 }, () => {
  it.each(['operator', 'main', 'reports', 'packages'])('refuses %s with a clear error', async (name) => {
    const r = await cli(fleet.checkout, 'token', 'issue', name, '--out', join(fleet.dir, `${name}.token`));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`'${name}' is a reserved name (operator, anonymous, main, master, head, reports, refs, heads, packages, info, objects, git-upload-pack, git-receive-pack, mesh)`);
    expect(existsSync(join(fleet.checkout, 'nodes', name))).toBe(false);
  });

  it('refuses HEAD as not a node name at all', async () => {
    const r = await cli(fleet.checkout, 'token', 'issue', 'HEAD', '--out', join(fleet.dir, 'HEAD.token'));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("'HEAD' is not a valid node name");
  });

  it('refuses, before committing anything, a token that could not be carried in time or written, and notes a life over a month', async () => {
    const head = await git(fleet.checkout, 'rev-parse', 'HEAD');
    const taken = join(fleet.dir, 'taken.token');
    writeFileSync(taken, 'an older token\n');
    const tries: Array<[string[], string]> = [
      [['--expires', '0', '--out', join(fleet.dir, 'short.token')], "mesh-cli: --expires must be at least 1s: a token always expires (0 is not 'never'), and must stay valid while it is carried to its machine (the default is 24h); nothing was committed"],
      [['--out', taken], `mesh-cli: --out ${taken} already exists: a token is written once, to a new file: remove the old one or name another; nothing was committed`],
      [['--out', join(fleet.dir, 'no-such-folder', 'a.token')], `mesh-cli: --out ${join(fleet.dir, 'no-such-folder', 'a.token')}: the folder ${join(fleet.dir, 'no-such-folder')} does not exist: create it, or name a file in a folder that does; nothing was done`],
    ];
    for (const [args, said] of tries) {
      const r = await cli(fleet.checkout, 'token', 'issue', 'late-1', ...args);
      expect([r.code, r.stderr.trim()]).toEqual([2, said]);
    }
    expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(head);
    expect(readFileSync(taken, 'utf8')).toBe('an older token\n');
    const long = await cli(fleet.checkout, 'token', 'issue', 'late-1', '--expires', '90d', '--out', join(fleet.dir, 'late-1.token'));
    expect(long.code, long.stderr).toBe(0);
    expect(long.stderr).toContain('note: this token is valid for 90 days; it is a secret carried by hand');
    await git(fleet.checkout, 'reset', '--quiet', '--hard', head);
  });

  it('writes the token before its commit: a disk too full for it commits nothing (exit 3), and leaves no part of it behind', async () => {
    const head = await git(fleet.checkout, 'rev-parse', 'HEAD');
    const full = tempDir('mesh-full-');
    // A filesystem of its own, filled, in a mount namespace that ends with the command.
    const script = `mount -t tmpfs -o size=64k tmpfs "$1" && { head -c 1M /dev/zero > "$1/fill" 2>/dev/null; node "$2" token issue late-2 --out "$1/late-2.token"; code=$?; rm "$1/fill"; ls -A "$1"; exit $code; }`;
    const r = await runProgram('unshare', ['--mount', 'sh', '-c', script, 'sh', full, MESH_CLI], fleet.checkout);
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr.trim()).toBe(`mesh-cli: cannot write the token to ${full}/late-2.token: ENOSPC: no space left on device, write: free space there, then issue it again; nothing was committed`);
    expect(r.stdout).toBe(''); // nothing left in the folder: no token, no part of one
    expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(head);
    expect(await git(fleet.checkout, 'status', '--porcelain')).toBe('');
  });

  it('takes its commit back when the token cannot take its name after it', async () => {
    const head = await git(fleet.checkout, 'rev-parse', 'HEAD');
    const out = join(fleet.dir, 'late-3.token');
    // A hook that takes the token's name between the commit and the token's link to it.
    const hooks = tempDir('mesh-hooks-');
    writeFileSync(join(hooks, 'post-commit'), `#!/bin/sh\necho someone else > '${out}'\n`, { mode: 0o755 });
    const hooksPath = (await gitIn(fleet.checkout, 'config', '--get', 'core.hooksPath')).stdout.trim();
    await git(fleet.checkout, 'config', 'core.hooksPath', hooks);
    try {
      const r = await cli(fleet.checkout, 'token', 'issue', 'late-3', '--out', out);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trim()).toMatch(new RegExp(`^mesh-cli: cannot write the token to ${out}: EEXIST: file already exists, link '${fleet.dir}/\\.late-3\\.token\\.\\d+\\.partial' -> '${out}'; its commit is taken back$`));
    } finally {
      if (hooksPath) await git(fleet.checkout, 'config', 'core.hooksPath', hooksPath);
      else await git(fleet.checkout, 'config', '--unset', 'core.hooksPath');
    }
    expect(readFileSync(out, 'utf8')).toBe('someone else\n');
    expect(readdirSync(fleet.dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
    expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(head);
    expect(await git(fleet.checkout, 'status', '--porcelain')).toBe('');
    expect(existsSync(join(fleet.checkout, 'nodes', 'late-3'))).toBe(false);
  });
});

describe('the server caps what a node may push', { timeout: 120_000 }, () => {
  /** A commit on reports/NODE holding `files`, pushed with the node credential; git's result. */
  async function pushReport(node: string, password: string, files: Record<string, Buffer | string>) {
    const dir = mkdtempSync(join(fleet.dir, `push-${node}-`));
    await git(dir, 'init', '--quiet');
    for (const [name, data] of Object.entries(files)) writeFileSync(join(dir, name), data);
    await git(dir, 'add', '-A');
    await git(dir, ...unsigned, 'commit', '--quiet', '-m', 'report');
    return gitIn(dir, 'push', '--force', fleet.plainUrl.replace('://', `://${node}:${password}@`), 'HEAD:refs/heads/reports/' + node);
  }

  it('refuses a report file over 1 MiB, and a pack over 16 MiB', async () => {
    const web5 = await issue('web-5');
    const big = await pushReport('web-5', web5.password, { 'status.json': 'x'.repeat(1024 * 1024 + 1) });
    expect(big.code).not.toBe(0);
    expect(big.stderr).toMatch(/mesh: report [0-9a-f]{40} of web-5 holds status.json \(1048577 bytes\), over the limit of 1048576 bytes per file; the push is refused/);
    const huge = await pushReport('web-5', web5.password, { 'noise.bin': randomBytes(17 * 1024 * 1024) });
    expect(huge.code).not.toBe(0);
    expect(huge.stderr).toMatch(/pack exceeds maximum allowed size/);
    expect(await git(fleet.checkout, 'ls-remote', 'origin', 'refs/heads/reports/web-5')).toBe('');
    const fine = await pushReport('web-5', web5.password, { 'status.json': '{}\n' });
    expect(fine.code).toBe(0);
  });

  it('status reads no report file over 1 MiB: the report shows invalid with the reason', async () => {
    // Written into the repository directly, as a server without mesh-cli serve's cap could hold it.
    const dir = mkdtempSync(join(fleet.dir, 'big-report-'));
    await git(dir, 'init', '--quiet');
    writeFileSync(join(dir, 'status.json'), `{"pad": "${'x'.repeat(3 * 1024 * 1024)}"}\n`);
    writeFileSync(join(dir, 'status.json.sig'), 'not a signature\n');
    await git(dir, 'add', '-A');
    await git(dir, ...unsigned, 'commit', '--quiet', '-m', 'report');
    await git(dir, 'push', '--quiet', '--force', join(fleet.server.data, 'fleet.git'), 'HEAD:refs/heads/reports/web-6');
    await issue('web-6');
    const status = await cli(fleet.checkout, 'status', '--json');
    const rows = (JSON.parse(status.stdout) as { nodes: Array<{ node: string; signature: string; reason?: string }> }).nodes;
    expect(rows.find((r) => r.node === 'web-6')).toMatchObject({ signature: 'invalid', reason: 'status.json does not parse: status.json is 3145740 bytes, over the 1048576 bytes read of a report: not read' });
  });
});
