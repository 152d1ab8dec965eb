/**
 * Secrets end to end, against the built CLIs and the real `mesh-cli serve`: a database password
 * set for the group db is rendered into a 0600 file on db-1 and on no other node; web-1, whose
 * declaration asks for a copy not encrypted to it, fails that one resource with the message that
 * says what to do; the plaintext (and its base64 and hex) is nowhere else: not in any git object
 * of any repository (the fleet's, the checkout's report store, the hosts' caches), not in plan,
 * status --json, the HTML page, the hosts' state folders or their logs. A re-enrolled db-1 can no
 * longer read it: validate names the secret at its file:line:column, `secret rekey` fixes it,
 * and the next pass applies. The stock `age` CLI opens the block with the node's identity file.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityFileText, newIdentity } from '../core/secrets/age.js';
import { cli, createFleet, MESH_CLI, MESH_HOST, runProgram, type Run, type TestFleet } from './helpers/fleet.js';
import { writeAccounts } from './helpers/accounts.js';

const PLAINTEXT = 'S3cr3t-db-pa55word-7f9c41e2';
const FORMS = [PLAINTEXT, Buffer.from(PLAINTEXT).toString('base64').replace(/=+$/, ''), Buffer.from(PLAINTEXT).toString('hex')];
const MESSAGE = 'secret db_password is not encrypted to this node; run mesh-cli secret rekey';

/** mesh-cli with `input` on stdin. */
function cliWithInput(cwd: string, input: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const proc = spawn('node', [MESH_CLI, ...args], { cwd, env: { ...process.env, MESH_LOG_LEVEL: 'warn' } });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    proc.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    proc.stdin.end(input);
  });
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : []));
}

/** Every git repository under `dir` (a folder holding objects/ and HEAD). */
function gitDirsUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    const names = readdirSync(d, { withFileTypes: true });
    if (names.some((e) => e.name === 'objects' && e.isDirectory()) && names.some((e) => e.name === 'HEAD')) out.push(d);
    for (const e of names) if (e.isDirectory() && e.name !== 'objects') walk(join(d, e.name));
  };
  walk(dir);
  return out;
}

/** Which of the plaintext's forms `text` holds, named. */
function leaks(text: string | Buffer): string[] {
  const s = typeof text === 'string' ? text : text.toString('latin1');
  return FORMS.filter((f) => s.includes(f));
}

describe('secrets: values only the nodes they are for can read', { timeout: 240_000 }, () => {
  let fleet: TestFleet;
  const roots = new Map<string, string>();
  const logs: string[] = [];
  let operatorFile: string;

  /** One pass of `node` at debug log level, its output kept for the search. */
  const pass = async (node: string) => {
    const r = await runProgram('node', [MESH_HOST, 'run', '--once', '--json', '--root', roots.get(node)!], roots.get(node)!, { MESH_LOG_LEVEL: 'debug' });
    logs.push(r.stdout, r.stderr);
    return { ...r, report: JSON.parse(r.stdout.trim().split('\n').pop()!) as { outcome: string; delivery: string; recipient?: string; resources: Array<{ id: string; result: string; error?: string; output?: string }> } };
  };
  const line = (report: { resources: Array<{ id: string }> }, id: string) => report.resources.find((r) => r.id === id);

  beforeAll(async () => {
    fleet = await createFleet();
    const operator = await newIdentity();
    operatorFile = join(fleet.dir, 'alice.age');
    writeFileSync(operatorFile, identityFileText(operator, new Date()), { mode: 0o600 });
    const mesh = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    await fleet.commit({ 'mesh.yaml': `${mesh}operators:\n  recipients:\n    - {name: alice, recipient: ${operator.recipient}}\n` }, 'operators');
    for (const [node, group] of [['db-1', 'db'], ['web-1', 'web']] as const) roots.set(node, await fleet.enrol(node, group));
  });
  afterAll(() => fleet?.close());

  it('enrolment makes an age identity beside the node key (0600) and the enrolment report names its recipient', async () => {
    const file = join(roots.get('db-1')!, 'etc/mesh-host/age-identity.txt');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const recipient = /# public key: (age1\S+)/.exec(readFileSync(file, 'utf8'))![1];
    await runProgram('git', ['fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*'], fleet.checkout);
    const report = JSON.parse(execFileSync('git', ['show', 'origin/reports/db-1:status.json'], { cwd: fleet.checkout, encoding: 'utf8' }));
    expect(report).toMatchObject({ kind: 'enrolment', recipient });
  });

  it('secret set reads stdin and encrypts to the nodes at or below the level and the operators', async () => {
    const set = await cliWithInput(fleet.checkout, PLAINTEXT, 'secret', 'set', 'db_password', '--level', 'db');
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe('nodes/db/secrets.yaml: db_password encrypted to db-1, operator alice; commit and push it\n');
    const file = readFileSync(join(fleet.checkout, 'nodes/db/secrets.yaml'), 'utf8');
    // One line a recipient, as a reviewer reads the file in a pull request.
    expect(file.split('\n').slice(0, 4)).toEqual(['db_password:', '  recipients:', expect.stringMatching(/^ {4}- \{ node: db-1, recipient: age1[0-9a-z]{58} \}$/), expect.stringMatching(/^ {4}- \{ operator: alice, recipient: age1[0-9a-z]{58} \}$/)]);
    const entry = parse(file).db_password;
    expect(entry.recipients.map((r: Record<string, string>) => r.node ?? `operator ${r.operator}`)).toEqual(['db-1', 'operator alice']);
    expect(entry.value).toMatch(/^-----BEGIN AGE ENCRYPTED FILE-----\n/);
    const argv = await cli(fleet.checkout, 'secret', 'set', 'db_password', PLAINTEXT);
    expect(argv.code).not.toBe(0); // never from an argument

    const show = await cli(fleet.checkout, 'secret', 'show', 'db_password', '--level', 'db', '--identity', operatorFile);
    expect(show).toMatchObject({ code: 0, stdout: PLAINTEXT });
  });

  it('db-1 gets the value in a 0600 file; web-1, asking for a copy not encrypted to it, fails that resource only', async () => {
    const dbEntry = readFileSync(join(fleet.checkout, 'nodes/db/secrets.yaml'), 'utf8');
    const file = (path: string) => `resources:\n  - type: file\n    path: ${path}\n    mode: "0600"\n    template: true\n    content: "password={{ secrets.db_password }}\\n"\n`;
    await fleet.commit({
      'nodes/db/app.yaml': `${file('/etc/db.conf')}  - type: command\n    name: show-password\n    template: true\n    run: [/bin/sh, -c, "echo {{ secrets.db_password }}; printf %s '{{ secrets.db_password }}' | base64; printf %s '{{ secrets.db_password }}' | od -An -tx1 | tr -d ' \\\\n'"]\n`,
      'nodes/web/secrets.yaml': dbEntry, // a copy encrypted to db-1 and alice only
      'nodes/web/app.yaml': `resources:\n  - type: file\n    path: /etc/motd\n    content: "web\\n"\n${file('/etc/db.conf').replace('resources:\n', '')}`,
    }, 'the database password for db-1; web-1 asks for it too');

    const db = await pass('db-1');
    expect(db.report.outcome, db.stdout).toBe('applied');
    const conf = join(roots.get('db-1')!, 'etc/db.conf');
    expect(readFileSync(conf, 'utf8')).toBe(`password=${PLAINTEXT}\n`);
    expect(statSync(conf).mode & 0o777).toBe(0o600);
    expect(line(db.report, 'command:show-password')).toMatchObject({ result: 'updated', output: '[secret masked]\n[secret masked]\n[secret masked]' });

    const web = await pass('web-1');
    expect(web.report.outcome).toBe('failed');
    expect(line(web.report, 'file:/etc/db.conf')).toEqual({ id: 'file:/etc/db.conf', result: 'failed', error: MESSAGE });
    expect(line(web.report, 'file:/etc/motd')).toMatchObject({ result: 'created' });
    expect(existsSync(join(roots.get('web-1')!, 'etc/db.conf'))).toBe(false);

    const validate = await cli(fleet.checkout, 'validate');
    expect(validate.code).toBe(1);
    expect(validate.stdout).toBe("nodes/web/secrets.yaml:1:1: secret db_password is not encrypted to web-1 (it is not in the secret's recipients); run mesh-cli secret rekey\n");
  });

  it('the plaintext, its base64 and its hex are nowhere: git objects, reports, plan, status, the page, state folders, logs', async () => {
    const plan = await cli(fleet.checkout, 'plan', '--base', 'HEAD~1', '--json');
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).notes).toContain("nodes/web/secrets.yaml:1:1: secret db_password is not encrypted to web-1 (it is not in the secret's recipients); run mesh-cli secret rekey"); // said before the push, as validate says it
    const changes = JSON.parse(plan.stdout).nodes.flatMap((n: { changes: Array<{ id: string; diff?: string[] }> }) => n.changes);
    expect(changes.find((c: { id: string }) => c.id === 'file:/etc/db.conf')).toMatchObject({ diff: ['changed (sensitive)'], sensitive: true });
    const planText = await cli(fleet.checkout, 'plan', '--base', 'HEAD~1');
    // A body that reads a secret is named, without its value.
    expect(planText.stdout).toContain('  + command:show-password: run\n      changed (sensitive)\n');
    const status = await cli(fleet.checkout, 'status', '--json');
    const page = join(fleet.dir, 'fleet.html');
    await cli(fleet.checkout, 'status', '--html', page);
    const noop = await runProgram('node', [MESH_HOST, 'run', '--once', '--noop', '--root', roots.get('db-1')!], roots.get('db-1')!, { MESH_LOG_LEVEL: 'debug' });
    logs.push(noop.stdout, noop.stderr);
    for (const [what, text] of [['plan', plan.stdout + planText.stdout], ['status --json', status.stdout], ['the HTML page', readFileSync(page, 'utf8')], ['host logs', logs.join('\n')]] as const) expect(leaks(text), what).toEqual([]);

    const declared = join(roots.get('db-1')!, 'etc/db.conf');
    const files = filesUnder(fleet.dir).filter((f) => f !== declared);
    expect(files.filter((f) => leaks(readFileSync(f)).length > 0)).toEqual([]);
    const repos = gitDirsUnder(fleet.dir);
    expect(repos.length).toBeGreaterThanOrEqual(4); // the served repo, the checkout, its report store, each host's cache
    for (const repo of repos) {
      const objects = execFileSync('git', ['--git-dir', repo, 'cat-file', '--batch-all-objects', '--batch'], { maxBuffer: 256 * 1024 * 1024 });
      expect(leaks(objects), repo).toEqual([]);
    }
  });

  it("the stock age CLI opens the block with the node's identity file", async (ctx) => {
    const age = runProgram('age', ['--version'], fleet.dir);
    if ((await age).code !== 0) {
      if (process.env.CI) throw new Error('age is not installed: scripts/install-deps.sh installs it');
      ctx.skip(); // age is not installed here (scripts/install-deps.sh installs it; CI must have it)
    }
    const block = parse(readFileSync(join(fleet.checkout, 'nodes/db/secrets.yaml'), 'utf8')).db_password.value;
    const out = execFileSync('age', ['-d', '-i', join(roots.get('db-1')!, 'etc/mesh-host/age-identity.txt')], { input: block, encoding: 'utf8' });
    expect(out).toBe(PLAINTEXT);
  });

  it('a re-enrolled db-1 cannot read it; validate names the secret, rekey fixes it, and the next pass applies', async () => {
    await fleet.commit({ 'nodes/web/secrets.yaml': null, 'nodes/web/app.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "web\\n"\n' }, 'web-1 no longer asks for the password');
    roots.set('db-1', await fleet.enrol('db-1', 'db'));
    const closed = await pass('db-1');
    expect(line(closed.report, 'file:/etc/db.conf')).toEqual({ id: 'file:/etc/db.conf', result: 'failed', error: MESSAGE });

    const validate = await cli(fleet.checkout, 'validate');
    expect(validate.code).toBe(1);
    expect(validate.stdout).toMatch(/^nodes\/db\/secrets\.yaml:1:1: secret db_password is not encrypted to db-1's current recipient \(db-1 re-enrolled since: its newest report names age1\w+\); run mesh-cli secret rekey\n$/);

    const rekey = await cli(fleet.checkout, 'secret', 'rekey', '--identity', operatorFile);
    expect(rekey.code, rekey.stderr).toBe(0);
    expect(rekey.stdout).toMatch(/^nodes\/db\/secrets\.yaml: db_password re-encrypted; added db-1 age1\w+…; removed db-1 age1\w+…\n/);
    expect(await cli(fleet.checkout, 'validate')).toMatchObject({ code: 0 });
    await fleet.commit({}, 'rekey db_password for the re-enrolled db-1');

    const applied = await pass('db-1');
    expect(applied.report.outcome, applied.stdout).toBe('applied');
    expect(readFileSync(join(roots.get('db-1')!, 'etc/db.conf'), 'utf8')).toBe(`password=${PLAINTEXT}\n`);
    const again = await cli(fleet.checkout, 'secret', 'rekey', '--identity', operatorFile);
    expect(again.stdout).toBe("every secret is encrypted to its nodes' current recipients and the operators: nothing to do\n");
  });

  it('a host without an identity (enrolled before secrets existed) makes one at its next pass, and that report is news, not a heartbeat', async () => {
    const file = join(roots.get('web-1')!, 'etc/mesh-host/age-identity.txt');
    const before = readFileSync(file, 'utf8');
    await pass('web-1');
    const quiet = await pass('web-1');
    expect(quiet.report).toMatchObject({ delivery: 'unchanged', recipient: /# public key: (age1\S+)/.exec(before)![1] });
    rmSync(file);
    const made = await pass('web-1');
    const recipient = /# public key: (age1\S+)/.exec(readFileSync(file, 'utf8'))![1];
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(recipient).not.toBe(quiet.report.recipient);
    expect(made.report).toMatchObject({ delivery: 'pushed', recipient });
  });

  it("a damaged identity stops the pass instead of being replaced: it holds the only key to the node's secrets", async () => {
    const root = roots.get('db-1')!;
    const file = join(root, 'etc/mesh-host/age-identity.txt');
    const good = readFileSync(file, 'utf8');
    const damaged = good.replace(/AGE-SECRET-KEY-1(\S+)/, (_, rest: string) => `AGE-SECRET-KEY-1${rest.slice(0, 20)}`);
    writeFileSync(file, damaged, { mode: 0o600 });
    try {
      const conf = readFileSync(join(root, 'etc/db.conf'), 'utf8');
      const stopped = await runProgram('node', [MESH_HOST, 'run', '--once', '--root', root], root);
      expect(stopped.code).toBe(2);
      expect(stopped.stderr).toContain(`the node's age identity ${file} cannot be read (it holds no AGE-SECRET-KEY-1 line); it holds the only key to this node's secrets, so mesh-host applies nothing and keeps it as it is.`);
      expect(readFileSync(file, 'utf8')).toBe(damaged);
      expect(readFileSync(join(root, 'etc/db.conf'), 'utf8')).toBe(conf);
    } finally {
      writeFileSync(file, good, { mode: 0o600 });
    }
    expect((await pass('db-1')).report.outcome).toBe('applied');
  });

  it('secret set warns when no operator can read the value back, since then no rekey can re-encrypt it', async () => {
    const mesh = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    try {
      expect((await cliWithInput(fleet.checkout, 'x', 'secret', 'set', 'token', '--level', 'web')).stderr).not.toContain('no operator');
      writeFileSync(join(fleet.checkout, 'mesh.yaml'), mesh.slice(0, mesh.indexOf('operators:')));
      const set = await cliWithInput(fleet.checkout, 'x', 'secret', 'set', 'token', '--level', 'web');
      expect(set.code, set.stderr).toBe(0);
      expect(set.stdout).toBe('nodes/web/secrets.yaml: token encrypted to web-1; commit and push it\n');
      expect(set.stderr).toContain("warning: no operator can read token back (mesh.yaml names no operators.recipients): when a node is enrolled again or joins nodes/web/, set it again with 'mesh-cli secret set'; with an operator recipient, 'mesh-cli secret rekey' does it\n");
    } finally {
      await runProgram('git', ['checkout', '--quiet', '--', '.'], fleet.checkout);
      await runProgram('git', ['clean', '--quiet', '-fd'], fleet.checkout);
    }
  });

  it('a node that cannot open a secret no operator can open is told to set it again: rekey could not open it either', async () => {
    const mesh = readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8');
    const dbSecrets = readFileSync(join(fleet.checkout, 'nodes/db/secrets.yaml'), 'utf8');
    const dbApp = readFileSync(join(fleet.checkout, 'nodes/db/app.yaml'), 'utf8');
    writeFileSync(join(fleet.checkout, 'mesh.yaml'), mesh.slice(0, mesh.indexOf('operators:')));
    const set = await cliWithInput(fleet.checkout, 'x', 'secret', 'set', 'token', '--level', 'web');
    expect(set.stdout).toBe('nodes/web/secrets.yaml: token encrypted to web-1; commit and push it\n');
    const tokenEntry = readFileSync(join(fleet.checkout, 'nodes/web/secrets.yaml'), 'utf8');
    writeFileSync(join(fleet.checkout, 'mesh.yaml'), mesh);
    try {
      // db-1 reads a copy encrypted to web-1 alone: nobody else, no operator, can open it.
      await fleet.commit({
        'nodes/web/secrets.yaml': null,
        'nodes/db/secrets.yaml': `${dbSecrets}${tokenEntry}`,
        'nodes/db/app.yaml': `${dbApp}  - type: file\n    path: /etc/token\n    template: true\n    content: "{{ secrets.token }}"\n`,
      }, 'db-1 asks for a token only web-1 can open');
      const remedy = 'no operator is among its recipients, so rekey cannot open it: set it again with mesh-cli secret set token --level db';
      const closed = await pass('db-1');
      expect(line(closed.report, 'file:/etc/token')).toEqual({ id: 'file:/etc/token', result: 'failed', error: `secret token is not encrypted to this node; ${remedy}` });
      expect(line(closed.report, 'file:/etc/db.conf')).toMatchObject({ result: 'unchanged' }); // its secret names alice: rekey is still the answer there
      const validate = await cli(fleet.checkout, 'validate');
      expect(validate.stdout).toMatch(new RegExp(`^nodes/db/secrets\\.yaml:\\d+:1: secret token is not encrypted to db-1 \\(it is not in the secret's recipients\\); ${remedy}\n$`));
    } finally {
      await fleet.commit({ 'nodes/db/secrets.yaml': dbSecrets, 'nodes/db/app.yaml': dbApp }, 'db-1 no longer asks for the token');
    }
  });

  it("a user's password hash from a secret: set on db-1, sealed in its store, shown nowhere; a value that is no hash fails that user alone, naming no value", async () => {
    const root = roots.get('db-1')!;
    writeAccounts(root);
    const hash = '$6$meshsalt$u8jsb1/K9dnE8n3tQPwbHYDR2yRzOVqbpy6.h7lWkFM.5nPM1Copm7C0lZ1dLomFFurj7cIfnXoKNsotqJIxk.';
    const shadowOf = (name: string) => readFileSync(join(root, 'etc/shadow'), 'utf8').split('\n').find((l) => l.startsWith(`${name}:`))?.split(':')[1];
    const dbSecrets = readFileSync(join(fleet.checkout, 'nodes/db/secrets.yaml'), 'utf8');
    try {
      expect((await cliWithInput(fleet.checkout, `${hash}\n`, 'secret', 'set', 'app_hash', '--level', 'db')).code).toBe(0);
      await fleet.commit({ 'nodes/db/users.yaml': 'resources:\n  - type: user\n    name: app\n    template: true\n    password: "{{ secrets.app_hash }}"\n' }, "the app user's password, from a secret");
      const plan = await cli(fleet.checkout, 'plan', '--base', 'HEAD~1', '--json');
      const changes = JSON.parse(plan.stdout).nodes.flatMap((n: { changes: Array<{ id: string }> }) => n.changes);
      expect(changes.find((c: { id: string }) => c.id === 'user:app')).toMatchObject({ action: 'add', fields: [{ field: 'password' }], sensitive: true });
      const applied = await pass('db-1');
      expect(applied.report.outcome, applied.stdout).toBe('applied');
      expect(line(applied.report, 'user:app')).toMatchObject({ result: 'created' });
      expect(shadowOf('app')).toBe(hash);
      const state = join(root, 'var/lib/mesh-host');
      expect(filesUnder(state).filter((f) => readFileSync(f, 'latin1').includes('$6$meshsalt'))).toEqual([]);
      expect(plan.stdout + applied.stdout + applied.stderr).not.toContain('$6$meshsalt');
      // Changed by hand: drift, as for any resource, though each pass is a new process reading the store's sealed copy.
      expect((await runProgram('usermod', ['--root', root, '--password', '!', 'app'], root)).code).toBe(0);
      writeFileSync(join(root, 'etc/db.conf'), 'password=changed by hand\n');
      const drifted = await pass('db-1');
      expect(line(drifted.report, 'user:app')).toEqual({ id: 'user:app', result: 'updated', changes: ['password changed'], drift: true });
      expect(line(drifted.report, 'file:/etc/db.conf')).toMatchObject({ result: 'updated', drift: true });
      expect(shadowOf('app')).toBe(hash);

      // A plain password where the hash belongs: that user fails, with where and why, and keeps its hash.
      expect((await cliWithInput(fleet.checkout, 'plain-pa55word', 'secret', 'set', 'app_hash', '--level', 'db')).code).toBe(0);
      await fleet.commit({}, 'a password where its hash belongs');
      const refused = await pass('db-1');
      expect(refused.report.outcome).toBe('failed');
      expect(line(refused.report, 'user:app')).toEqual({
        id: 'user:app',
        result: 'failed',
        error: "its secrets could not be rendered with their values: nodes/db/users.yaml:5:15: resources.0.password: password is the hash etc/shadow holds, as 'openssl passwd -6' or 'mkpasswd -m yescrypt' prints it (starting with $), or ! for no password: never the password itself",
      });
      expect(line(refused.report, 'file:/etc/db.conf')).toMatchObject({ result: 'unchanged' });
      expect(shadowOf('app')).toBe(hash);
      expect(refused.stdout + refused.stderr).not.toContain('plain-pa55word');
    } finally {
      await fleet.commit({ 'nodes/db/secrets.yaml': dbSecrets, 'nodes/db/users.yaml': null }, 'no app user');
    }
    const removed = await pass('db-1');
    expect(line(removed.report, 'user:app')).toMatchObject({ result: 'removed' });
    expect(shadowOf('app')).toBeUndefined();
  });

  it('retire and revoke list the secrets whose values must change', async () => {
    const revoked = await cli(fleet.checkout, 'revoke', 'web-1', '--json');
    expect(JSON.parse(revoked.stdout).secrets).toEqual([]);
    const retired = await cli(fleet.checkout, 'retire', 'db-1', '--json');
    expect(JSON.parse(retired.stdout).secrets).toEqual(['nodes/db/secrets.yaml: db_password']);
    const text = await cli(fleet.checkout, 'revoke', 'db-1');
    expect(text.stdout).toContain("and change the value of every secret encrypted to db-1 ('mesh-cli secret set NAME --level PATH'; a rekey does not take back the blocks old commits hold):\n  - nodes/db/secrets.yaml: db_password\n");
  });
});
