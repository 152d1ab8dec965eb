/** core/declaration/render.ts: one rendered declaration per node, from its groups, variables, roles and facts. */
import { describe, expect, it } from 'vitest';
import { readLayout } from '../core/fleet/layout.js';
import { renderDeclaration, type RenderResult } from '../core/declaration/render.js';
import type { Facts } from '../schema/facts.js';
import { fromFiles } from '../mesh-cli/tree.js';
import { parseReport } from '../core/report/verify.js';

const facts: Facts = { hostname: 'h', os: 'debian', osVersion: '12', osCodename: 'bookworm', osFamily: 'debian', arch: 'x64', cpus: 4, memoryMb: 2048 };

async function render(files: Record<string, string>, node: string, f: Facts = facts): Promise<RenderResult> {
  const tree = fromFiles(new Map(Object.entries(files)));
  const layout = await readLayout(tree);
  expect(layout.problems).toEqual([]);
  return renderDeclaration(tree, layout.nodes.get(node)!, f);
}

const fleet: Record<string, string> = {
  'nodes/vars.yaml': 'port: 8080\nworkers: null\ngreeting: hello\n',
  'nodes/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "managed by mesh\\n"\n',
  'nodes/web/vars.yaml': 'port: 9090\nsites: [a, b]\n',
  'nodes/web/app.yaml': [
    'include:',
    '  - role: roles/vhost.yaml',
    '    with: {server_name: "{{ node.name }}.example.org", port: "{{ vars.port }}"}',
    '  - role: roles/vhost.yaml',
    '    with: {server_name: "admin.{{ node.name }}", port: 8443}',
    'resources:',
    '  - type: file',
    '    path: /etc/app/app.ini',
    '    template: true',
    '    content: |',
    '      port = {{ vars.port }}',
    '      workers = {{ vars.workers | default: facts.cpus }}',
    '      sites = {{ vars.sites | join: "," }}',
    '  - type: file',
    '    path: /etc/app/literal.conf',
    '    content: "x = {{ not rendered }}\\n"',
    '',
  ].join('\n'),
  'nodes/web/web-1/node.yaml': '',
  'nodes/web/web-2/node.yaml': '',
  'nodes/web/web-2/vars.yaml': 'port: 9191\n',
  'nodes/db/db-1/node.yaml': '',
  'roles/vhost.yaml': [
    'params:',
    '  server_name: null',
    '  port: 80',
    'resources:',
    '  - type: file',
    '    path: /etc/nginx/sites/{{ params.server_name }}.conf',
    '    template: true',
    '    content: "listen {{ params.port }}; server_name {{ params.server_name }};\\n"',
    '',
  ].join('\n'),
};

describe('render: groups, variables, roles with parameters, templates and facts', () => {
  it('renders each node from its own levels, outermost first', async () => {
    const web2 = await render(fleet, 'web-2');
    expect(web2.ok).toBe(true);
    if (!web2.ok) return;
    expect(web2.declaration.resources).toEqual([
      { type: 'file', path: '/etc/motd', content: 'managed by mesh\n' },
      { type: 'file', path: '/etc/nginx/sites/web-2.example.org.conf', content: 'listen 9191; server_name web-2.example.org;\n' },
      { type: 'file', path: '/etc/nginx/sites/admin.web-2.conf', content: 'listen 8443; server_name admin.web-2;\n' },
      { type: 'file', path: '/etc/app/app.ini', content: 'port = 9191\nworkers = 4\nsites = a,b\n' },
      { type: 'file', path: '/etc/app/literal.conf', content: 'x = {{ not rendered }}\n' },
    ]);
    expect(web2.declaration.readFacts).toEqual(['file:/etc/app/app.ini']);
    expect(web2.declaration.warnings).toEqual([]);
    expect(web2.declaration.files).toEqual(['nodes/vars.yaml', 'nodes/web/vars.yaml', 'nodes/web/web-2/vars.yaml', 'nodes/base.yaml', 'nodes/web/app.yaml', 'roles/vhost.yaml', 'roles/vhost.yaml']);
    const web1 = await render(fleet, 'web-1');
    expect(web1.ok && web1.declaration.resources[3]).toEqual({ type: 'file', path: '/etc/app/app.ini', content: 'port = 9090\nworkers = 4\nsites = a,b\n' });
    const db1 = await render(fleet, 'db-1');
    expect(db1.ok && db1.declaration.resources).toEqual([{ type: 'file', path: '/etc/motd', content: 'managed by mesh\n' }]);
  });

  it('the digest changes with a fact that a template reads, and only then', async () => {
    const a = await render(fleet, 'web-1');
    const b = await render(fleet, 'web-1', { ...facts, cpus: 8 });
    const c = await render(fleet, 'db-1', { ...facts, cpus: 8 });
    const d = await render(fleet, 'db-1');
    expect(a.ok && b.ok && a.declaration.digest !== b.declaration.digest).toBe(true);
    expect(c.ok && d.ok && c.declaration.digest === d.declaration.digest).toBe(true);
  });

  it('a rendered field is converted to its type, and a value that does not convert is an error at its place', async () => {
    const files = {
      'nodes/n-1/node.yaml': '',
      'nodes/n-1/vars.yaml': 'on: "true"\nuid: 1001\nbad: maybe\n',
      'nodes/n-1/a.yaml': 'resources:\n  - type: service\n    name: app\n    enabled: "{{ vars.on }}"\n  - type: user\n    name: app\n    uid: "{{ vars.uid }}"\n',
    };
    const ok = await render(files, 'n-1');
    expect(ok.ok && ok.declaration.resources).toEqual([{ type: 'service', name: 'app', enabled: true }, { type: 'user', name: 'app', uid: 1001 }]);
    const bad = await render({ ...files, 'nodes/n-1/a.yaml': 'resources:\n  - type: service\n    name: app\n    running: "{{ vars.bad }}"\n' }, 'n-1');
    expect(!bad.ok && bad.problems).toEqual([{ file: 'nodes/n-1/a.yaml', line: 4, col: 14, message: "running renders to 'maybe', which is not true or false" }]);
  });

  it('an unknown variable is reported at the file, line and column of the template', async () => {
    const r = await render({ ...fleet, 'nodes/web/app.yaml': 'resources:\n  - type: file\n    path: /etc/x\n    template: true\n    content: |\n      a\n      b = {{ vars.prot }}\n' }, 'web-1');
    expect(!r.ok && r.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message.split(':')[0]}`)).toEqual(['nodes/web/app.yaml:7:14: unknown variable vars.prot']);
  });

  it('a path has one form: //, /./ and a trailing / are errors at their place that name the form to write, rendered or literal', async () => {
    const files = {
      'nodes/n-1/node.yaml': '',
      'nodes/n-1/vars.yaml': 'sub: ""\n',
      'nodes/n-1/a.yaml': 'resources:\n  - type: file\n    path: /etc//x\n    content: a\n  - type: file\n    path: /etc/./y\n    content: a\n  - type: directory\n    path: /srv/\n  - type: file\n    path: "/etc/{{ vars.sub }}/z"\n    content: a\n',
    };
    const r = await render(files, 'n-1');
    expect(!r.ok && r.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`)).toEqual([
      'nodes/n-1/a.yaml:3:11: resources.0.path: write it as /etc/x (one form per path: no //, no /./, no trailing /)',
      'nodes/n-1/a.yaml:6:11: resources.1.path: write it as /etc/y (one form per path: no //, no /./, no trailing /)',
      'nodes/n-1/a.yaml:9:11: resources.2.path: write it as /srv (one form per path: no //, no /./, no trailing /)',
      'nodes/n-1/a.yaml:11:11: resources.3.path: write it as /etc/z (one form per path: no //, no /./, no trailing /)',
    ]);
  });

  it('bytes that are not UTF-8, and NUL bytes, are refused at their place: mesh writes text files only', async () => {
    const base = { 'nodes/n-1/node.yaml': '' };
    const broken = await render({ ...base, 'nodes/n-1/a.yaml': 'resources:\n  - type: file\n    path: /etc/x\n    content: "caf\uFFFD"\n' }, 'n-1');
    expect(!broken.ok && broken.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message.split(' (')[0]}`)).toEqual(['nodes/n-1/a.yaml:4:18: nodes/n-1/a.yaml is not UTF-8 text here']);
    const nul = await render({ ...base, 'nodes/n-1/a.yaml': 'resources:\n  - type: file\n    path: /etc/x\n    content: "a\\0b"\n' }, 'n-1');
    expect(!nul.ok && nul.problems.map((p) => `${p.line}:${p.col}: ${p.message.split(':')[1]}`)).toEqual(['4:14:  content holds a NUL byte']);
    const source = await render({ ...base, 'nodes/n-1/a.yaml': 'resources:\n  - type: file\n    path: /etc/x\n    source: blob.bin\n', 'nodes/n-1/blob.bin': '\u007fELF\u0000\u0001' }, 'n-1');
    expect(!source.ok && source.problems.map((p) => `${p.line}:${p.col}: ${p.message.split(' (')[0]}`)).toEqual(['4:13: source blob.bin is not UTF-8 text']);
  });

  it('a command argument YAML reads as another type is an error that says to quote it', async () => {
    const r = await render({ 'nodes/n-1/node.yaml': '', 'nodes/n-1/a.yaml': 'resources:\n  - type: command\n    name: t\n    run: [true]\n' }, 'n-1');
    expect(!r.ok && r.problems.map((p) => `${p.line}:${p.col}: ${p.message}`)).toEqual(['4:10: resources.0.run: every argument is a string: quote true (YAML reads it as a boolean)']);
  });

  it('the same resource twice is one when identical, and an error naming both places when not', async () => {
    const same = await render({ 'nodes/n-1/node.yaml': '', 'nodes/a.yaml': 'resources:\n  - type: directory\n    path: /srv\n', 'nodes/n-1/b.yaml': 'resources:\n  - type: directory\n    path: /srv\n' }, 'n-1');
    expect(same.ok && same.declaration.resources).toEqual([{ type: 'directory', path: '/srv' }]);
    const differ = await render({ 'nodes/n-1/node.yaml': '', 'nodes/a.yaml': 'resources:\n  - type: directory\n    path: /srv\n', 'nodes/n-1/b.yaml': 'resources:\n  - type: directory\n    path: /srv\n    mode: "0700"\n' }, 'n-1');
    expect(!differ.ok && differ.problems).toEqual([{ file: 'nodes/n-1/b.yaml', line: 2, col: 5, message: 'directory:/srv is declared again here and differently at nodes/a.yaml:2:5; declare it once, and vary it with variables' }]);
  });

  it('one path declared as two types, in a group and its node, is an error at the second naming the first (as mesh-cli validate says it)', async () => {
    const r = await render({ 'nodes/web/n-1/node.yaml': '', 'nodes/web/a.yaml': 'resources:\n  - type: directory\n    path: /srv/app\n', 'nodes/web/n-1/b.yaml': 'resources:\n  - type: file\n    path: /srv/app\n    content: "x"\n' }, 'n-1');
    expect(!r.ok && r.problems).toEqual([{ file: 'nodes/web/n-1/b.yaml', line: 3, col: 11, message: '/srv/app is declared here as a file and as a directory at nodes/web/a.yaml:2:5; one path can hold one thing: keep one of them' }]);
  });

  it('a role reached twice with the same parameters is included once; a cycle, a missing and an unknown parameter are errors at the include', async () => {
    const role = 'params:\n  p: null\nresources:\n  - type: directory\n    path: /srv/{{ params.p }}\n';
    const twice = await render({ 'nodes/n-1/node.yaml': '', 'roles/r.yaml': role, 'nodes/a.yaml': 'include:\n  - {role: roles/r.yaml, with: {p: x}}\n', 'nodes/n-1/b.yaml': 'include:\n  - {role: roles/r.yaml, with: {p: x}}\n' }, 'n-1');
    expect(twice.ok && twice.declaration.resources).toEqual([{ type: 'directory', path: '/srv/x' }]);
    const bad = await render({
      'nodes/n-1/node.yaml': '',
      'roles/r.yaml': role,
      'roles/loop-a.yaml': 'include: [roles/loop-b.yaml]\n',
      'roles/loop-b.yaml': 'include: [roles/loop-a.yaml]\n',
      'nodes/n-1/b.yaml': 'include:\n  - roles/r.yaml\n  - role: roles/r.yaml\n    with: {p: x, q: y}\n  - roles/loop-a.yaml\n',
    }, 'n-1');
    expect(!bad.ok && bad.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`)).toEqual([
      "nodes/n-1/b.yaml:2:5: roles/r.yaml needs the parameter 'p': pass it in this include's with:",
      "nodes/n-1/b.yaml:4:18: roles/r.yaml takes no parameter 'q' (it takes: p)",
      'roles/loop-b.yaml:1:11: include cycle: nodes/n-1/b.yaml -> roles/loop-a.yaml -> roles/loop-b.yaml -> roles/loop-a.yaml; a role may not include itself, directly or through others',
    ]);
  });

  it('a literal body that reads like a template of ours gets a warning, not an error', async () => {
    const r = await render({ 'nodes/n-1/node.yaml': '', 'nodes/n-1/a.yaml': 'resources:\n  - type: file\n    path: /a\n    content: "port={{ vars.port }}"\n  - type: file\n    path: /b\n    content: "{{ .Values.x }} ${HOME}"\n' }, 'n-1');
    expect(r.ok && r.declaration.warnings).toEqual([{ file: 'nodes/n-1/a.yaml', line: 4, col: 14, message: "this body holds '{{ vars.' but is copied literally: add template: true to render it (or leave it, if the braces are the file's own)" }]);
  });

  it("a service's restartOn or reloadOn naming a path no resource declares gets a warning (it would never restart or reload it), not an error", async () => {
    const r = await render({ 'nodes/n-1/node.yaml': '', 'nodes/a.yaml': 'resources:\n  - type: file\n    path: /etc/app.conf\n    content: "x"\n', 'nodes/n-1/b.yaml': 'resources:\n  - type: service\n    name: app\n    restartOn: [/etc/app.conf, /etc/nginx/nginx.conf]\n    reloadOn: [/etc/app.d/site.conf]\n' }, 'n-1');
    expect(r.ok && r.declaration.warnings).toEqual([
      { file: 'nodes/n-1/b.yaml', line: 4, col: 32, message: 'restartOn names /etc/nginx/nginx.conf, which this node\'s declaration does not declare: app is restarted only when a pass changes a file it declares, so this never restarts it; declare /etc/nginx/nginx.conf (or take it out of restartOn)' },
      { file: 'nodes/n-1/b.yaml', line: 5, col: 16, message: 'reloadOn names /etc/app.d/site.conf, which this node\'s declaration does not declare: app is reloaded only when a pass changes a file it declares, so this never reloads it; declare /etc/app.d/site.conf (or take it out of reloadOn)' },
    ]);
  });

  it('a source file is rendered only with template: true', async () => {
    const files = { 'nodes/n-1/node.yaml': '', 'nodes/n-1/vars.yaml': 'v: 7\n', 'nodes/n-1/app.conf': 'v={{ vars.v }}\n', 'nodes/n-1/a.yaml': 'resources:\n  - type: file\n    path: /a\n    source: app.conf\n  - type: file\n    path: /b\n    source: app.conf\n    template: true\n' };
    const r = await render(files, 'n-1');
    expect(r.ok && r.declaration.resources).toEqual([{ type: 'file', path: '/a', content: 'v={{ vars.v }}\n' }, { type: 'file', path: '/b', content: 'v=7\n' }]);
  });
});

describe('facts a report carries, from hosts older and newer than this reader', () => {
  const files = (content: string) => ({ 'nodes/n-1/node.yaml': '', 'nodes/n-1/a.yaml': `resources:\n  - type: file\n    path: /etc/apt/sources.list.d/main.list\n    template: true\n    content: "${content}"\n` });
  const report = (facts: Record<string, unknown>, more: Record<string, unknown> = {}) =>
    JSON.stringify({
      format: 1, node: 'n-1', generation: 1, nodeKey: 'k', vouch: 'v', hostVersion: '9.0.0', sequence: 1, previous: null, observedAt: '2026-01-01T00:00:00.000Z',
      kind: 'reconcile', commit: 'c', digest: null, outcome: 'applied', errors: [], resources: [], owned: [], facts, ...more,
    });
  const first = { hostname: 'n-1', os: 'debian', osVersion: '12', arch: 'x64', cpus: 2, memoryMb: 1024 };

  it("reads a newer host's report (a field and a fact it does not know) and renders with every fact the report carries", async () => {
    const parsed = parseReport('n-1', report({ ...first, osCodename: 'bookworm', osFamily: 'debian', virtual: 'kvm' }, {
        uptimeClass: 'long',
        resources: [{ id: 'file:/x', result: 'unchanged', took: 3 }],
        owned: [{ id: 'file:/x', type: 'file', resource: {}, prior: null, state: 'verified', at: '2026-01-01T00:00:00.000Z', checkedBy: 'sha256' }],
        signer: { fingerprint: 'SHA256:x', name: 'op', keyType: 'ed25519' },
        briefing: [{ check: 'clock', ok: true, detail: 'within 1s', ms: 3 }],
      }));
    expect(parsed.ok && parsed.value.facts).toEqual({ ...first, osCodename: 'bookworm', osFamily: 'debian', virtual: 'kvm' });
    if (!parsed.ok) return;
    const r = await render(files('deb http://deb.debian.org/debian {{ facts.osCodename }} main # {{ facts.virtual }}\\n'), 'n-1', parsed.value.facts as Facts);
    expect(r.ok && r.declaration.resources[0]).toMatchObject({ content: 'deb http://deb.debian.org/debian bookworm main # kvm\n' });
  });

  it("reads an older host's report without the later facts, and a template that reads one says why it is missing", async () => {
    const parsed = parseReport('n-1', report(first));
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const r = await render(files('deb http://deb.debian.org/debian {{ facts.osCodename }} main\\n'), 'n-1', parsed.value.facts as Facts);
    expect(!r.ok && r.problems.map((p) => `${p.line}:${p.col}: ${p.message}`)).toEqual([
      "5:51: unknown variable facts.osCodename: the node's last report carries no fact osCodename (its host is older than this mesh-cli); plan it after the host upgrades, or give a fallback with | default: VALUE",
    ]);
    const missing = parseReport('n-1', report({ hostname: 'n-1', os: 'debian' }));
    expect(!missing.ok && missing.problems[0]?.message).toMatch(/facts\.osVersion/);
  });
});
