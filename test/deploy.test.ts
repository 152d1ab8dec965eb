/**
 * Deploy is a commit: review before merge with `validate` and `plan`, and after merge the
 * honest rollout of one commit with `status --commit`. Real git http-backend, real git
 * binary, six simulated machines running the built mesh-host, the built mesh-cli.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cli, createFleet, git, hostCmd, MESH_CLI, newMachine, type TestFleet } from './helpers/fleet.js';
import { checkXml } from './helpers/xml.js';

const webRole = (conf: string, extra = '') => `resources:
  - type: directory
    path: /srv/www
    mode: "0755"
  - type: file
    path: /srv/www/index.html
    content: "hello\\n"
  - type: file
    path: /etc/web.conf
    content: "${conf}"
    mode: "0640"
${extra}`;
const webNode = (motd: string, extra = '') => `include: [roles/web.yaml]\nresources:\n  - type: file\n    path: /etc/motd\n    content: "${motd}\\n"\n${extra}`;
const WEB = ['web-1', 'web-2', 'web-3', 'web-4'];

/** Enrol a machine with no package manager: adoption completes, but its briefing makes it ineligible. */
async function enrolIneligible(fleet: TestFleet, node: string): Promise<string> {
  const tokenFile = join(fleet.dir, `${node}.token`);
  expect((await cli(fleet.checkout, 'token', 'issue', node, '--out', tokenFile)).code).toBe(0);
  await git(fleet.checkout, 'push', '--quiet');
  const root = newMachine(join(fleet.dir, 'machines', node));
  const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
  expect(enrolled.code, enrolled.stderr).toBe(1); // joined, but it will apply nothing: not "done"
  expect(enrolled.stdout.split('\n')[0]).toMatch(new RegExp(`^enrolled as ${node} \\(generation 1\\) with \\S+, but INELIGIBLE: it applies nothing here \\(package manager present: no dpkg database`));
  return root;
}

async function runHost(root: string, expectCode = 0): Promise<void> {
  const run = await hostCmd(root, 'run', '--once');
  expect(run.code, run.stdout + run.stderr).toBe(expectCode);
}

/** Commit ids, times and ages are different every run; commits the test did not name become <other commit>. */
function normalise(text: string, commits: Record<string, string>): string {
  let out = text;
  for (const [name, sha] of Object.entries(commits)) out = out.replaceAll(sha, `<${name}>`).replaceAll(sha.slice(0, 12), `<${name}>`);
  return out
    .replace(/\b[0-9a-f]{40}\b|\b[0-9a-f]{12}\b/g, '<other commit>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>').replace(/\(\d+[smhd] ago\)/g, '(<age> ago)');
}

describe('deploy is a commit', () => {
  let fleet: TestFleet;
  const roots: Record<string, string> = {};
  const commits: Record<string, string> = {};

  beforeAll(async () => {
    fleet = await createFleet();
    for (const node of [...WEB, 'db-1']) roots[node] = await fleet.enrol(node);
    roots['lab-1'] = await enrolIneligible(fleet, 'lab-1');
    const files: Record<string, string> = { 'roles/web.yaml': webRole('listen = 80\\nworkers = 2\\npassword = hunter2\\n') };
    for (const node of WEB) files[`nodes/${node}/base.yaml`] = webNode(node);
    files['nodes/db-1/base.yaml'] = 'resources:\n  - type: file\n    path: /etc/db.conf\n    content: "max_connections = 100\\n"\n';
    commits.base = await fleet.commit(files, 'web and db: base');
    await Promise.all([...WEB, 'db-1'].map((node) => runHost(roots[node]!)));
  }, 300_000); // six enrolments and five runs on a loaded 2-core machine
  afterAll(async () => fleet?.close());

  it('init writes a CI workflow that validates and plans pull requests and reports the rollout after merge', async () => {
    const workflow = parse(readFileSync(join(fleet.checkout, '.github/workflows/mesh.yml'), 'utf8'));
    const runs = (job: string) => workflow.jobs[job].steps.map((s: { run?: string }) => s.run ?? '').join('\n');
    expect(Object.keys(workflow.on)).toEqual(['pull_request', 'push']);
    expect(runs('review')).toMatch(/mesh-cli\.mjs" validate --format github/);
    expect(runs('review')).toMatch(/mesh-cli\.mjs" plan --base "origin\/\$\{\{ github\.base_ref \}\}" --head HEAD --format markdown/);
    expect(runs('review')).toMatch(/gh pr comment/);
    expect(runs('rollout')).toMatch(/mesh-cli\.mjs" status --commit "\$GITHUB_SHA" --since "\$since" --wait 15m/);
    // The rollout step, run as the runner runs it (bash -eo pipefail) with a stand-in for node that records its arguments.
    const step = workflow.jobs.rollout.steps.find((st: { name?: string }) => st.name === 'Rollout of this push');
    const bin = join(fleet.dir, 'ci-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'node'), '#!/bin/sh\necho "$@" > "$RUNNER_TEMP/args"\necho rollout\nexit "$STUB_CODE"\n', { mode: 0o755 });
    const ci = (before: string, code: number) => {
      const r = spawnSync('bash', ['-eo', 'pipefail', '-c', step.run], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, RUNNER_TEMP: bin, GITHUB_SHA: 'c0ffee', BEFORE: before, STUB_CODE: String(code) }, encoding: 'utf8' });
      return { code: r.status, stdout: r.stdout, args: readFileSync(join(bin, 'args'), 'utf8').trim() };
    };
    expect(ci('abc123', 0)).toMatchObject({ code: 0, args: `${bin}/mesh-cli.mjs status --commit c0ffee --since abc123 --wait 15m` });
    expect(ci('0000000000000000000000000000000000000000', 0).args).toContain('--since c0ffee^ ');
    expect(ci('abc123', 4)).toMatchObject({ code: 0, stdout: expect.stringContaining('::warning::some nodes have not applied c0ffee yet') });
    expect(ci('abc123', 1).code).toBe(1);
    expect(readFileSync(join(fleet.checkout, 'README.md'), 'utf8')).toMatch(/\*\*GitLab\*\*/);
    expect(await git(fleet.checkout, 'ls-files', '.github')).toBe('.github/workflows/mesh.yml');
  });

  it('a branch that changes a role plans exactly the nodes that include it, resource by resource, secrets elided', async () => {
    await git(fleet.checkout, 'checkout', '--quiet', '-b', 'web-tls');
    const role = webRole('listen = 443\\nworkers = 4\\npassword = correct-horse\\n', '  - type: directory\n    path: /srv/www/tls\n    mode: "0700"\n')
      .replace('  - type: file\n    path: /srv/www/index.html\n    content: "hello\\n"\n', '')
      .replace('mode: "0640"', 'mode: "0600"');
    writeFileSync(join(fleet.checkout, 'roles/web.yaml'), role);
    writeFileSync(join(fleet.checkout, 'nodes/web-3/base.yaml'), webNode('web-3 (canary)'));
    await git(fleet.checkout, '-c', 'user.name=dev', '-c', 'user.email=dev@localhost', 'commit', '--quiet', '-am', 'web: TLS');
    commits.branch = await git(fleet.checkout, 'rev-parse', 'HEAD');

    const json = await cli(fleet.checkout, 'plan', '--base', 'main', '--head', 'web-tls', '--json');
    expect(json.code, json.stderr).toBe(0);
    const plan = JSON.parse(json.stdout);
    expect(plan.nodes.map((n: { node: string }) => n.node)).toEqual(WEB);
    expect(plan.summary).toBe('touches 4 nodes; 0 failed their last apply; 0 ineligible');
    expect(json.stdout).not.toMatch(/hunter2|correct-horse/);

    const md = await cli(fleet.checkout, 'plan', '--base', 'main', '--head', 'web-tls', '--format', 'markdown');
    expect(md.code, md.stderr).toBe(0);
    expect(normalise(md.stdout, commits)).toMatchInlineSnapshot(`
      "## mesh plan

      \`<base>\` → \`<branch>\`: **touches 4 nodes; 0 failed their last apply; 0 ineligible**

      | node | last outcome | at commit | last contact | eligible |
      | --- | --- | --- | --- | --- |
      | web-1 | applied | \`<base>\` | <time> | yes |
      | web-2 | applied | \`<base>\` | <time> | yes |
      | web-3 | applied | \`<base>\` | <time> | yes |
      | web-4 | applied | \`<base>\` | <time> | yes |

      ### web-1, web-2, web-4 (3 nodes)

      Changed: \`roles/web.yaml\`

      - **changed** \`file:/etc/web.conf\`: content, mode "0640" → "0600"
      - **added** \`directory:/srv/www/tls\`: mode "0700"
      - **removed** \`file:/srv/www/index.html\`

      <details><summary>file:/etc/web.conf</summary>

      \`\`\`diff
      @@ -1,3 +1,3 @@
      -listen = 80
      -workers = 2
      -password = «elided»
      +listen = 443
      +workers = 4
      +password = «elided»
      \`\`\`

      </details>

      ### web-3

      Changed: \`nodes/web-3/base.yaml\`, \`roles/web.yaml\`

      - **changed** \`file:/etc/web.conf\`: content, mode "0640" → "0600"
      - **added** \`directory:/srv/www/tls\`: mode "0700"
      - **changed** \`file:/etc/motd\`: content
      - **removed** \`file:/srv/www/index.html\`

      <details><summary>file:/etc/web.conf</summary>

      \`\`\`diff
      @@ -1,3 +1,3 @@
      -listen = 80
      -workers = 2
      -password = «elided»
      +listen = 443
      +workers = 4
      +password = «elided»
      \`\`\`

      </details>

      <details><summary>file:/etc/motd</summary>

      \`\`\`diff
      @@ -1,1 +1,1 @@
      -web-3
      +web-3 (canary)
      \`\`\`

      </details>
      "
    `);
  });

  it('validate --format github annotates every broken declaration at its file, line and column', async () => {
    const clean = await cli(fleet.checkout, 'validate', '--format', 'github');
    expect(clean).toMatchObject({ code: 0, stdout: '' });
    expect(clean.stderr).toBe('valid: 6 nodes, 1 role, mesh.yaml\n');
    const broken: Record<string, string> = {
      'nodes/web-1/extra.yaml': 'resources:\n  - type: file\n    path: /etc/extra\n    colour: red\n',
      'nodes/web-2/extra.yaml': 'include: [roles/nope.yaml]\nresources:\n  - type: file\n    path: /etc/motd\n    content: "again\\n"\n',
      'nodes/Web_5/base.yaml': 'resources: []\n',
      'nodes/lab-1/base.yaml': 'resources:\n  - type: directory\n    path: /srv/lab\n',
      'roles/db.yaml': 'resources:\n  - type: file\n    path: /etc/db.conf\n    mode: 0644\n',
    };
    for (const [path, text] of Object.entries(broken)) {
      mkdirSync(join(fleet.checkout, path, '..'), { recursive: true });
      writeFileSync(join(fleet.checkout, path), text);
    }
    const identity = join(fleet.checkout, 'nodes/db-1/node.yaml');
    writeFileSync(identity, readFileSync(identity, 'utf8').replace('node: db-1', 'node: db-9'));
    writeFileSync(join(fleet.checkout, 'mesh.yaml'), readFileSync(join(fleet.checkout, 'mesh.yaml'), 'utf8') + 'colour: blue\n');
    try {
      const r = await cli(fleet.checkout, 'validate', '--format', 'github');
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('8 problems in 7 files (6 nodes, 2 roles checked)\n');
      expect(r.stdout.replace(/ineligible \(.*\); it may/, 'ineligible (<briefing>); it may')).toMatchInlineSnapshot(`
        "::error file=mesh.yaml,line=13,col=1::unknown field 'colour'
        ::error file=nodes/db-1/node.yaml,line=2,col=7::node.yaml says node 'db-9' but it is in nodes/db-1/: a node's identity must be in its own folder (issue a token with mesh-cli token issue db-1)
        ::error file=nodes/lab-1/base.yaml,line=2,col=5::node lab-1 is given resources by nodes/lab-1/, but its last report says it is ineligible (<briefing>); it may only have an empty declaration: remove them (its groups' files are not applied to it)
        ::error file=nodes/Web_5/base.yaml,line=1,col=1::group folder 'Web_5' must be lower-case letters, digits and - (as node names are)
        ::error file=nodes/web-1/extra.yaml,line=4,col=5::resources.0: unknown field 'colour'
        ::error file=nodes/web-2/extra.yaml,line=1,col=11::include roles/nope.yaml does not exist at this commit
        ::error file=nodes/web-2/extra.yaml,line=3,col=5::file:/etc/motd is declared again here and differently at nodes/web-2/base.yaml:3:5; declare it once, and vary it with variables
        ::error file=roles/db.yaml,line=4,col=11::resources.0.mode: mode must be a quoted string such as "0644" (YAML reads 0644 as a number)
        "
      `);
    } finally {
      await git(fleet.checkout, 'checkout', '--quiet', '--', '.');
      await git(fleet.checkout, 'clean', '--quiet', '-fd');
    }
  });

  it('after the merge, status --commit says which nodes applied it (even by a later commit), judged by the report each made then, and which are outstanding', async () => {
    await git(fleet.checkout, 'checkout', '--quiet', 'main');
    await git(fleet.checkout, 'merge', '--quiet', '--ff-only', 'web-tls');
    await git(fleet.checkout, 'push', '--quiet');
    commits.merge = commits.branch!;
    delete commits.branch;
    await Promise.all([runHost(roots['web-1']!), runHost(roots['web-3']!)]);
    // A later commit breaks web-3 only; web-2 first runs after it, skipping straight past the merge.
    commits.later = await fleet.commit({ 'nodes/web-3/base.yaml': webNode('web-3 (canary)', '  - type: file\n    path: /srv/missing/app.conf\n    content: "x\\n"\n') }, 'web-3: app.conf');
    await Promise.all([runHost(roots['web-2']!), runHost(roots['web-3']!, 1)]);

    const r = await cli(fleet.checkout, 'status', '--commit', commits.merge, '--json');
    expect(r.code, r.stderr).toBe(4); // web-4 is outstanding; none failed
    const rollout = JSON.parse(normalise(r.stdout, commits));
    expect(rollout).toEqual({
      commit: '<merge>',
      affected: WEB,
      applied: [
        { node: 'web-1', commit: '<merge>', lastContact: '<time>', later: false },
        { node: 'web-2', commit: '<later>', lastContact: '<time>', later: true },
        // web-3 applied the merge, then failed on a later commit: that is a note on this rollout, not its verdict.
        { node: 'web-3', commit: '<merge>', lastContact: '<time>', later: false, note: 'later failed at <later>' },
      ],
      failed: [],
      outstanding: [{ node: 'web-4', commit: '<base>', lastContact: '<time>' }],
      unknown: [],
      unverified: [],
    });

    const text = await cli(fleet.checkout, 'status', '--commit', commits.merge);
    expect(text.code).toBe(4);
    expect(normalise(text.stdout, commits)).toMatchInlineSnapshot(`
      "rollout of <merge> "web: TLS": 4 nodes affected: 3 applied, 0 failed, 1 outstanding
      applied      web-1  at <merge>, <time> (<age> ago)
      applied      web-2  at <later> (a later commit), <time> (<age> ago)
      applied      web-3  at <merge>, <time> (<age> ago) (later failed at <later>)
      outstanding  web-4  last contact <time> (<age> ago) at <base>
      "
    `);

    const onlyWeb3 = await cli(fleet.checkout, 'status', '--commit', commits.later, '--json');
    expect(onlyWeb3.code).toBe(1);
    expect(JSON.parse(onlyWeb3.stdout)).toMatchObject({ affected: ['web-3'], applied: [], outstanding: [], failed: [{ node: 'web-3', later: false, reason: '1 resource failed', errors: [expect.stringMatching(/^file:\/srv\/missing\/app\.conf: the parent directory of \/srv\/missing\/app\.conf does not exist/)] }] });
    // The push of both commits, judged whole from before the merge: web-3 failed its last step.
    const push = await cli(fleet.checkout, 'status', '--commit', commits.later, '--since', commits.base!, '--json');
    expect(push.code).toBe(1);
    expect(JSON.parse(push.stdout)).toMatchObject({ affected: WEB, failed: [{ node: 'web-3' }], outstanding: [{ node: 'web-4' }] });
  });

  it('status --commit --wait returns as soon as the last outstanding node reports', async () => {
    const started = Date.now();
    const proc = spawn('node', [MESH_CLI, 'status', '--commit', commits.merge!, '--wait', '60s', '--poll', '300ms'], { cwd: fleet.checkout });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (b: Buffer) => (stdout += b));
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    // Let web-4 report only once the wait has seen it outstanding (or the command has already ended, which fails below).
    await new Promise<void>((resolve) => {
      proc.stderr.on('data', (b: Buffer) => ((stderr += b), stderr.includes('waiting for web-4') && resolve()));
      proc.on('exit', () => resolve());
    });
    await runHost(roots['web-4']!);
    expect(await exited).toBe(0); // every affected node applied it; nothing is outstanding any more
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(stderr).toBe('waiting for web-4\n');
    expect(normalise(stdout, commits)).toMatch(/^rollout of <merge> "web: TLS": 4 nodes affected: 4 applied, 0 failed, 0 outstanding\n/);
    expect(normalise(stdout, commits)).toMatch(/^applied {6}web-4 {2}at <later> \(a later commit\), /m);
  });

  it('a wait that runs out reports the outstanding nodes as outstanding, not failed, and exits 4 ("not there yet")', async () => {
    commits.db = await fleet.commit({ 'nodes/db-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/db.conf\n    content: "max_connections = 200\\n"\n' }, 'db: more connections');
    const r = await cli(fleet.checkout, 'status', '--commit', commits.db, '--wait', '1s', '--poll', '300ms');
    expect(r.code).toBe(4);
    expect(normalise(r.stdout, commits)).toMatchInlineSnapshot(`
      "rollout of <db> "db: more connections": 1 node affected: 0 applied, 0 failed, 1 outstanding
      outstanding  db-1  last contact <time> (<age> ago) at <base>
      still outstanding when the wait ended: db-1 (not failed: they have not reported yet)
      "
    `);
    const json = JSON.parse((await cli(fleet.checkout, 'status', '--commit', 'main', '--json')).stdout);
    expect(json).toMatchObject({ commit: commits.db, affected: ['db-1'], applied: [], failed: [], outstanding: [{ node: 'db-1', commit: commits.base }] });
  });

  it('status has a summary line, and --node shows one node\'s report history, every report verified', async () => {
    // Reports are verified on worker threads from 256 of them; make this run use them too, from
    // a checkout whose report index is gone (it is rebuilt from origin).
    rmSync(join(fleet.checkout, '.git/mesh/reports.json'));
    process.env.MESH_VERIFY_POOL_FROM = '1';
    const r = await cli(fleet.checkout, 'status');
    delete process.env.MESH_VERIFY_POOL_FROM;
    expect(r.code, r.stderr).toBe(1); // web-3 failed its last pass, and lab-1 is ineligible
    expect(normalise(r.stdout.split('\n').slice(-2).join('\n'), commits)).toBe("6 nodes: 4 applied, 1 failed, 1 ineligible; 0 at main's tip (<db>)\n");
    const json = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout);
    expect(json.nodes.find((n: { node: string }) => n.node === 'lab-1')).toMatchObject({ outcome: 'ineligible', eligible: false, signature: 'valid' });

    const history = await cli(fleet.checkout, 'status', '--node', 'web-3');
    expect(history.code, history.stderr).toBe(0);
    expect(normalise(history.stdout, commits).replace(/ 0\.\d+\.\d+\S* /g, ' <version> ')).toMatchInlineSnapshot(`
      "reports/web-3: last 4 reports, newest first
      #4  <time> (<age> ago)  reconcile  failed  at <later>  <version>  signature valid
          file:/srv/missing/app.conf: the parent directory of /srv/missing/app.conf does not exist: declare it as a directory resource
      #3  <time> (<age> ago)  reconcile  applied  at <merge>  <version>  signature valid
      #2  <time> (<age> ago)  reconcile  applied  at <base>  <version>  signature valid
      #1  <time> (<age> ago)  enrolment  enrolled  at <other commit>  <version>  signature valid
      "
    `);
    const entries = JSON.parse((await cli(fleet.checkout, 'status', '--node', 'web-3', '--json', '--limit', '2')).stdout).entries;
    expect(entries.map((e: { sequence: number; signature: string; chain: string }) => [e.sequence, e.signature, e.chain])).toEqual([[4, 'valid', 'ok'], [3, 'valid', 'ok']]);
  });

  it('status --html writes one well-formed page with every node and the last rollouts as bars', async () => {
    const file = join(fleet.dir, 'fleet.html');
    const r = await cli(fleet.checkout, 'status', '--html', file);
    expect(r.code, r.stderr).toBe(1); // the page is written; the code still says web-3 failed its last pass
    const page = readFileSync(file, 'utf8');
    const xml = checkXml(page);
    expect(xml.problems).toEqual([]);
    for (const node of [...WEB, 'db-1', 'lab-1']) expect(xml.text).toContain(node);
    expect(page).not.toMatch(/<link|src=/); // self-contained: its one script (the contrast check) is inline
    expect(page.match(/<script\b[^>]*>/g)).toEqual(['<script>']);
    const rows = [...page.matchAll(/<tr><td><code>([0-9a-f]{12})<\/code>.*?<td>(\d+ applied, \d+ failed, \d+ outstanding of \d+)<\/td><\/tr>/g)].map((m) => `${normalise(m[1]!, commits)} ${m[2]}`);
    // web-3 applied <merge> and <base>, then failed at <later>: only <later>'s rollout is red.
    expect(rows).toEqual(['<db> 0 applied, 0 failed, 1 outstanding of 1', '<later> 0 applied, 1 failed, 0 outstanding of 1', '<merge> 4 applied, 0 failed, 0 outstanding of 4', '<base> 5 applied, 0 failed, 0 outstanding of 5']);
    expect(page).toContain('<span class="applied" style="width:100.00%" title="applied: web-1, web-2, web-3, web-4">4</span>');
  });

  it('status --html and signers --out name a folder that does not exist, or a folder, at once (exit 2), doing nothing', async () => {
    const missing = join(fleet.dir, 'no-such-folder', 'fleet.html');
    const html = await cli(fleet.checkout, 'status', '--html', missing);
    expect(html.code).toBe(2);
    expect(html.stderr).toBe(`mesh-cli: --html ${missing}: the folder ${join(fleet.dir, 'no-such-folder')} does not exist: create it, or name a file in a folder that does; nothing was done\n`);
    expect(html.stdout).toBe('');
    expect((await cli(fleet.checkout, 'status', '--html', fleet.dir)).stderr).toContain(`--html ${fleet.dir} is a folder: name a file`);
    const signers = await cli(fleet.checkout, 'signers', '--out', missing);
    expect(signers.code).toBe(2);
    expect(signers.stderr).toContain(`--out ${missing}: the folder ${join(fleet.dir, 'no-such-folder')} does not exist`);
    expect(existsSync(join(fleet.dir, 'no-such-folder'))).toBe(false);
  });
});
