/**
 * The fleet language end to end, on the real server with real hosts: nodes in groups, variables
 * at three levels, a template with the node's name and a fact, a role included with two sets of
 * parameters; `mesh-cli set` changes one variable, the plan names exactly the nodes it touches,
 * and after the hosts run, `status --commit` says which applied it.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd, type TestFleet } from './helpers/fleet.js';

const app = `include:
  - role: roles/vhost.yaml
    with: {server_name: "{{ node.name }}.example.org", port: "{{ vars.port }}"}
  - role: roles/vhost.yaml
    with: {server_name: "admin.{{ node.name }}", port: 8443}
resources:
  - type: directory
    path: /etc/app
  - type: file
    path: /etc/app/app.ini
    template: true
    content: |
      # {{ vars.greeting }} from {{ node.name }} ({{ node.groups | join: "/" }}) on {{ facts.hostname }}
      port = {{ vars.port }}
      workers = {{ vars.workers | default: facts.cpus }}
  - type: command
    name: reload-app
    run: [/bin/sh, -c, 'echo reloaded >> "$MESH_ROOT/etc/app/reloads"']
    onChange: ["file:/etc/app/app.ini"]
`;

const vhost = `params:
  server_name: null
  port: 80
resources:
  - type: directory
    path: /etc/vhosts
  - type: file
    path: /etc/vhosts/{{ params.server_name }}.conf
    template: true
    content: "listen {{ params.port }}; server_name {{ params.server_name }};\\n"
`;

describe('the fleet language: groups, variables, templates and roles with parameters', () => {
  let fleet: TestFleet;
  const roots = new Map<string, string>();
  const run = async (node: string) => {
    const r = await hostCmd(roots.get(node)!, 'run', '--once');
    expect(r.stderr, `${node}: ${r.stderr}`).not.toContain('error');
    return r;
  };
  const file = (node: string, path: string) => readFileSync(join(roots.get(node)!, path), 'utf8');

  beforeAll(async () => {
    fleet = await createFleet();
    for (const [node, group] of [['web-1', 'web'], ['web-2', 'web'], ['db-1', 'db']] as const) {
      const root = await fleet.enrol(node, group);
      writeFileSync(join(root, 'etc/hostname'), `${node}.lab\n`); // the hostname fact of a simulated machine
      roots.set(node, root);
    }
  });
  afterAll(async () => fleet?.close());

  it('each node gets the files its groups, variables, roles and facts make', async () => {
    await fleet.commit({
      'nodes/vars.yaml': 'port: 8080\ngreeting: hello\n',
      'nodes/web/vars.yaml': 'port: 9090\n',
      'nodes/web/web-2/vars.yaml': 'port: 9191\n',
      'nodes/web/app.yaml': app,
      'roles/vhost.yaml': vhost,
      'nodes/db/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    template: true\n    content: "{{ node.name }}: {{ vars.greeting }}\\n"\n',
    }, 'web and db groups');
    for (const node of roots.keys()) await run(node);
    const workers = (await import('node:os')).cpus().length;
    expect(file('web-1', 'etc/app/app.ini')).toBe(`# hello from web-1 (web) on web-1.lab\nport = 9090\nworkers = ${workers}\n`);
    expect(file('web-2', 'etc/app/app.ini')).toBe(`# hello from web-2 (web) on web-2.lab\nport = 9191\nworkers = ${workers}\n`);
    expect(file('web-1', 'etc/vhosts/web-1.example.org.conf')).toBe('listen 9090; server_name web-1.example.org;\n');
    expect(file('web-2', 'etc/vhosts/admin.web-2.conf')).toBe('listen 8443; server_name admin.web-2;\n');
    expect(file('db-1', 'etc/motd')).toBe('db-1: hello\n');
    // reload-app ran once, after app.ini was written; the next, unchanged pass runs nothing.
    expect(file('web-1', 'etc/app/reloads')).toBe('reloaded\n');
    const again = await hostCmd(roots.get('web-1')!, 'run', '--once', '--json');
    expect(JSON.parse(again.stdout).resources.filter((r: { result: string }) => r.result !== 'unchanged')).toEqual([]);
    expect(file('web-1', 'etc/app/reloads')).toBe('reloaded\n');
  });

  it('mesh-cli set changes one variable; plan names exactly the nodes it touches; status --commit says they applied it', async () => {
    const set = await cli(fleet.checkout, 'set', 'nodes/web/vars.yaml', 'port=9999');
    expect(set.stdout).toBe('nodes/web/vars.yaml: port: 9090 -> 9999\n');
    await git(fleet.checkout, 'commit', '--quiet', '-am', 'web: port 9999');
    await git(fleet.checkout, 'push', '--quiet');
    const plan = await cli(fleet.checkout, 'plan', '--base', 'HEAD~1', '--format', 'json');
    expect(plan.code).toBe(0);
    const planned = JSON.parse(plan.stdout) as { nodes: Array<{ node: string; changes: Array<{ id: string }> }> };
    expect(planned.nodes.map((n) => n.node)).toEqual(['web-1']); // web-2 sets its own port; db-1 is in another group
    expect(planned.nodes[0]!.changes.map((c) => c.id).sort()).toEqual(['file:/etc/app/app.ini', 'file:/etc/vhosts/web-1.example.org.conf']);
    // Rendered with the facts web-1 reported (its hostname), not placeholders.
    const text = await cli(fleet.checkout, 'plan', '--base', 'HEAD~1');
    expect(text.stdout).toContain(' # hello from web-1 (web) on web-1.lab\n');
    expect(text.stdout).not.toContain('cannot plan');
    // The plan says what the change sets off there, as the pass below does.
    expect(text.stdout).toContain('\n  → command:reload-app runs (file:/etc/app/app.ini changes)\n');
    expect((planned.nodes[0] as { triggers?: unknown }).triggers).toEqual([{ id: 'command:reload-app', action: 'run', by: ['file:/etc/app/app.ini'] }]);
    for (const node of roots.keys()) await run(node);
    expect(file('web-1', 'etc/app/app.ini')).toContain('port = 9999\n');
    // The command watching app.ini ran on web-1 once more (its file changed), not on web-2 (unchanged).
    expect(file('web-1', 'etc/app/reloads')).toBe('reloaded\nreloaded\n');
    expect(file('web-2', 'etc/app/reloads')).toBe('reloaded\n');
    const status = await cli(fleet.checkout, 'status', '--commit', 'HEAD', '--json');
    const rollout = JSON.parse(status.stdout) as { affected: string[]; applied: Array<{ node: string }>; outstanding: unknown[]; failed: unknown[] };
    expect(rollout.affected).toEqual(['web-1']);
    expect(rollout.applied.map((a) => a.node)).toEqual(['web-1']);
    expect(rollout).toMatchObject({ outstanding: [], failed: [] });
  });

  it('status --commit renders each node with the facts it reported: a change that leaves its rendering as it was does not affect it', async () => {
    await fleet.commit({ 'nodes/web/who.yaml': 'resources:\n  - type: file\n    path: /etc/who\n    template: true\n    content: "{{ facts.hostname }}\\n"\n' }, 'who');
    for (const node of ['web-1', 'web-2']) await run(node);
    // Renders differently only on a machine called placeholder-host: no real node is affected.
    await fleet.commit({ 'nodes/web/who.yaml': 'resources:\n  - type: file\n    path: /etc/who\n    template: true\n    content: "{{ facts.hostname | replace: \'placeholder-host\', \'nobody\' }}\\n"\n' }, 'who, unless a placeholder');
    const status = await cli(fleet.checkout, 'status', '--commit', 'HEAD', '--json');
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ affected: [], applied: [], outstanding: [], failed: [] });
  });

  it('a node that never reported cannot be planned where its declaration reads facts, and plan says so', async () => {
    const issued = await cli(fleet.checkout, 'token', 'issue', 'web-3', '--group', 'web', '--out', join(fleet.dir, 'web-3.token'));
    expect(issued.code).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    const plan = await cli(fleet.checkout, 'plan', '--base', 'HEAD~1', '--format', 'json');
    const web3 = (JSON.parse(plan.stdout) as { nodes: Array<{ node: string; cannotPlan?: string[] }> }).nodes.find((n) => n.node === 'web-3');
    expect(web3?.cannotPlan).toEqual(['file:/etc/app/app.ini', 'file:/etc/who']);
    expect((await cli(fleet.checkout, 'plan', '--base', 'HEAD~1')).stdout).toContain('web-3 (changed: nodes/web/web-3/node.yaml)\n  cannot plan: no report yet; file:/etc/app/app.ini, file:/etc/who read facts, shown here with placeholder facts');
  });

  it('a retired node in a group applies none of its group\'s resources, and says only that it is retired', async () => {
    expect(file('db-1', 'etc/motd')).toBe('db-1: hello\n');
    const retired = await cli(fleet.checkout, 'retire', 'db-1');
    expect(retired.code, retired.stderr).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    expect((await cli(fleet.checkout, 'validate')).code).toBe(0);
    for (let pass = 0; pass < 2; pass++) {
      const r = await hostCmd(roots.get('db-1')!, 'run', '--once', '--json');
      expect(r.code, r.stderr).toBe(0);
      const removed = pass === 0 ? [{ id: 'file:/etc/motd', result: 'removed' }] : [];
      expect(JSON.parse(r.stdout)).toMatchObject({ outcome: 'retired', resources: removed, owned: [], errors: [] });
    }
    expect(existsSync(join(roots.get('db-1')!, 'etc/motd'))).toBe(false);
  });

  it('a template error is reported at its file, line and column; the host applies nothing of it and keeps enforcing the last good declaration', async () => {
    await fleet.commit({ 'nodes/web/app.yaml': app.replace('{{ vars.port }}\n      workers', '{{ vars.prot }}\n      workers') }, 'a typo');
    const validate = await cli(fleet.checkout, 'validate');
    expect(validate.code).toBe(1);
    expect(validate.stdout + validate.stderr).toContain('nodes/web/app.yaml:14:17: unknown variable vars.prot');
    const before = file('web-1', 'etc/app/app.ini');
    // Drift on the last good declaration is still corrected while the new commit does not validate.
    writeFileSync(join(roots.get('web-1')!, 'etc/app/app.ini'), 'edited by hand\n');
    await hostCmd(roots.get('web-1')!, 'run', '--once');
    expect(file('web-1', 'etc/app/app.ini')).toBe(before);
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    const report = JSON.parse(await git(fleet.checkout, 'show', 'origin/reports/web-1:status.json')) as { outcome: string; errors: Array<{ file?: string; line?: number; col?: number; message: string }> };
    expect(report.outcome).toBe('failed');
    expect(report.errors[0]).toMatchObject({ file: 'nodes/web/app.yaml', line: 14, col: 17 });
    // The drift that pass corrected shows in status.
    const table = await cli(fleet.checkout, 'status');
    expect(table.stdout, table.stdout).toMatch(/^web-1 .* failed \(1 drift corrected\) /m);
    expect(report.errors.at(-1)).toMatchObject({ code: 'E_KEPT_LAST_GOOD', message: expect.stringMatching(/^[0-9a-f]{12} does not validate, so nothing of it is applied; the last good declaration \([0-9a-f]{12}\) is still enforced: 2 changed, 0 failed$/) }); // app.ini restored, and reload-app ran after it
  });
});
