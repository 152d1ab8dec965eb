/**
 * Nodes in groups, as mesh-cli sees them, end to end against the built CLI and the real
 * `mesh-cli serve`: `token issue --group` places a new node, token, retire and revoke find a
 * node wherever it sits, the server lets a grouped node in with its own credential (and refuses
 * a name that is in two folders), `status` lists nodes and never a group, `validate` checks
 * the layout and every group's files, and `plan` finds the nodes a group or role change touches.
 */
import { existsSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd, newMachine, type TestFleet } from './helpers/fleet.js';
import { nodeYamls, notANode, pathsReader } from '../mesh-cli/layout.js';

describe('node.yaml found in a listing of nodes/', () => {
  it('finds each node at any depth; a name in two folders has none; a node.yaml inside a node or a group folder is no node', async () => {
    const listing = [
      'nodes/vars.yaml',
      'nodes/solo/node.yaml',
      'nodes/web/base.yaml',
      'nodes/web/eu/web-1/node.yaml',
      'nodes/web/eu/web-1/app.yaml',
      'nodes/web/web-2/node.yaml',
      'nodes/web/web-2/inner/node.yaml',
      'nodes/a/twin/node.yaml',
      'nodes/b/twin/node.yaml',
    ];
    expect(await nodeYamls(listing)).toEqual(new Map([
      ['twin', null],
      ['solo', 'nodes/solo/node.yaml'],
      ['web-1', 'nodes/web/eu/web-1/node.yaml'],
      ['web-2', 'nodes/web/web-2/node.yaml'],
    ]));
    const tree = pathsReader(listing);
    expect(await tree.list('nodes/web/eu')).toEqual([]);
    expect(await tree.list('nodes/none')).toBeNull();
    expect(await tree.folders('nodes/web')).toEqual(['eu', 'web-2']);
  });
});

let fleet: TestFleet;
beforeAll(async () => {
  fleet = await createFleet();
});
afterAll(() => fleet?.close());

/** Issue a token with `args` in the fleet checkout; the run, and the token when it was issued. */
async function issue(...args: string[]) {
  const r = await cli(fleet.checkout, 'token', 'issue', ...args, '--json');
  const text: string | null = r.code === 0 ? JSON.parse(r.stdout).token : null;
  return { ...r, text, token: text === null ? null : parse(text) };
}

const identityAt = (path: string) => parse(readFileSync(join(fleet.checkout, path), 'utf8'));
const committed = async () => (await git(fleet.checkout, 'show', '--name-only', '--format=%s', 'HEAD')).split('\n').filter(Boolean);

/** The HTTP status of a ref advertisement asked for as `user`:`password`. */
async function advertise(user: string, password: string): Promise<number> {
  const res = await fetch(`${fleet.plainUrl}/info/refs?service=git-upload-pack`, { headers: { Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` } });
  await res.arrayBuffer();
  return res.status;
}

describe('a node name the fleet does not have', () => {
  it('is answered with the node meant when only its case differs, else with the first dozen nodes there are', () => {
    const many = Array.from({ length: 14 }, (_, i) => `web-${String(i).padStart(2, '0')}`);
    expect(notANode('WEB-03', many).message).toBe('there is no node WEB-03 under nodes/ (a folder holding node.yaml): did you mean web-03? (node names are lower case)');
    expect(notANode('db-1', many).message).toBe("there is no node db-1 under nodes/ (a folder holding node.yaml); the nodes are: web-00, web-01, web-02, web-03, web-04, web-05, web-06, web-07, web-08, web-09, web-10, web-11 and 2 more ('mesh-cli status' lists them)");
    expect(notANode('db-1', []).message).toBe('there is no node db-1 under nodes/ (a folder holding node.yaml); the fleet has no node yet');
  });
});

describe('token issue, retire and revoke find a node wherever it sits', { timeout: 60_000 }, () => {
  it('token issue --group puts a new node in nodes/PATH/NODE/, and a later token finds it there', async () => {
    const first = await issue('web-1', '--group', 'web/eu');
    expect(first.code, first.stderr).toBe(0);
    expect(await committed()).toEqual(['token: issue web-1 generation 1', 'nodes/web/eu/web-1/node.yaml']);
    expect(identityAt('nodes/web/eu/web-1/node.yaml')).toMatchObject({ node: 'web-1', generation: 1 });

    for (const args of [['web-1'], ['web-1', '--group', 'web/eu']]) {
      const again = await issue(...args);
      expect(again.code, again.stderr).toBe(0);
      expect(await committed()).toEqual([`token: issue web-1 generation ${again.token.generation}`, 'nodes/web/eu/web-1/node.yaml']);
    }
    expect(identityAt('nodes/web/eu/web-1/node.yaml')).toMatchObject({ node: 'web-1', generation: 3 });
  });

  it('a node without --group goes in nodes/NODE/ as before', async () => {
    const r = await issue('solo-1');
    expect(r.code, r.stderr).toBe(0);
    expect(await committed()).toEqual(['token: issue solo-1 generation 1', 'nodes/solo-1/node.yaml']);
  });

  it('--group naming another place than where the node is says to git mv it, and changes nothing', async () => {
    const head = await git(fleet.checkout, 'rev-parse', 'HEAD');
    const r = await issue('web-1', '--group', 'db');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("mesh-cli: web-1 is already a node, in nodes/web/eu/web-1/, not in nodes/db/web-1/: moving a node between groups is a git move (git mv nodes/web/eu/web-1 nodes/db/web-1, then commit); drop --group to issue its token where it is\n");
    const top = await issue('solo-1', '--group', 'web');
    expect(top.stderr).toContain('solo-1 is already a node, in nodes/solo-1/, not in nodes/web/solo-1/');
    expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(head);
  });

  it('a bad group path or a group through a node folder is refused', async () => {
    const bad = await issue('web-9', '--group', 'web/EU');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--group web/EU: 'EU' is not a valid group name");
    const empty = await issue('web-9', '--group', 'web//eu');
    expect(empty.stderr).toContain("--group web//eu: '' is not a valid group name");
    const deep = await issue('web-9', '--group', 'a/b/c/d/e/f/g/h/i');
    expect(deep.stderr).toContain('--group a/b/c/d/e/f/g/h/i: groups nest at most 8 deep');
    const group = await issue('web');
    expect(group.code).toBe(2);
    expect(group.stderr).toBe('mesh-cli: nodes/web/ is a group (it holds the folder eu/), so it cannot become the node web: a node holds no folders; choose another name for the node\n');
    const inNode = await issue('web-9', '--group', 'web/eu/web-1');
    expect(inNode.code).toBe(2);
    expect(inNode.stderr).toContain('nodes/web/eu/web-1/ is a node (it holds node.yaml), so it cannot hold other nodes');
  });

  it('a node name in two folders is refused naming both', async () => {
    const head = await git(fleet.checkout, 'rev-parse', 'HEAD');
    for (const dir of ['nodes/a/twin', 'nodes/b/c/twin']) {
      mkdirSync(join(fleet.checkout, dir), { recursive: true });
      writeFileSync(join(fleet.checkout, dir, 'node.yaml'), 'node: twin\ngeneration: 1\n');
    }
    for (const args of [['token', 'issue', 'twin'], ['retire', 'twin'], ['revoke', 'twin']]) {
      const r = await cli(fleet.checkout, ...args);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('mesh-cli: node twin is in nodes/a/twin/ and nodes/b/c/twin/: node names are unique across nodes/ (its report branch is reports/twin); remove or rename all but one (git rm -r / git mv), then run this again\n');
    }
    expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(head);
    await git(fleet.checkout, 'clean', '-fdq', 'nodes/a', 'nodes/b');
  });

  it('retire empties the node\'s own folder where it sits and leaves its groups\' files', async () => {
    await fleet.commit({ 'nodes/web/eu/web-1/app.yaml': 'resources: []\n', 'nodes/web/base.yaml': 'resources: []\n' }, 'web-1 declarations');
    const r = await cli(fleet.checkout, 'retire', 'web-1', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ node: 'web-1', removed: ['nodes/web/eu/web-1/app.yaml'] });
    expect(identityAt('nodes/web/eu/web-1/node.yaml')).toMatchObject({ node: 'web-1', generation: 3, retired: true });
    expect(await git(fleet.checkout, 'ls-files', 'nodes/web')).toBe('nodes/web/base.yaml\nnodes/web/eu/web-1/node.yaml');
  });

  it('revoke bumps the generation in the node\'s own folder and names where its secrets were', async () => {
    const r = await cli(fleet.checkout, 'revoke', 'web-1', '--json');
    expect(r.code, r.stderr).toBe(0);
    const revoked = JSON.parse(r.stdout);
    expect(revoked).toMatchObject({ node: 'web-1', generation: 4 });
    expect(revoked.credentials[2]).toContain("deploy keys in nodes/web/eu/web-1/, its groups' files or its roles");
    expect(await committed()).toEqual(['revoke web-1: generation 4, no token', 'nodes/web/eu/web-1/node.yaml']);
    const unknown = await cli(fleet.checkout, 'revoke', 'web-9');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^mesh-cli: there is no node web-9 under nodes\/ \(a folder holding node.yaml\); the nodes are: (\S+, )*web-1(, \S+)*\n$/);
    const upper = await cli(fleet.checkout, 'retire', 'WEB-1');
    expect([upper.code, upper.stderr]).toEqual([2, 'mesh-cli: there is no node WEB-1 under nodes/ (a folder holding node.yaml): did you mean web-1? (node names are lower case)\n']);
  });
});

describe('mesh-cli serve and status find a node in a group', { timeout: 60_000 }, () => {
  it('a grouped node authenticates with its own credential; a name in two folders on main is refused', async () => {
    const web2 = await issue('web-2', '--group', 'web');
    const db1 = await issue('db-1', '--group', 'db');
    await git(fleet.checkout, 'push', '--quiet');
    expect(await advertise('web-2', web2.token.credential.password)).toBe(200);
    expect(await advertise('db-1', db1.token.credential.password)).toBe(200);
    expect(await advertise('web-2', db1.token.credential.password)).toBe(401);

    // A second db-1 under another group: the tree is invalid, and neither is let in.
    await fleet.commit({ 'nodes/web/db-1/node.yaml': readFileSync(join(fleet.checkout, 'nodes/db/db-1/node.yaml'), 'utf8') }, 'a second db-1');
    expect(await advertise('db-1', db1.token.credential.password)).toBe(401);
    expect(await advertise('web-2', web2.token.credential.password)).toBe(200);
    await fleet.commit({ 'nodes/web/db-1/node.yaml': null }, 'one db-1 again');
    expect(await advertise('db-1', db1.token.credential.password)).toBe(200);
  });

  it('status lists every node at any depth and never a group, and verifies a grouped node\'s reports against its node.yaml', async () => {
    const web3 = await issue('web-3', '--group', 'web/eu');
    await git(fleet.checkout, 'push', '--quiet');
    const tokenFile = join(fleet.dir, 'web-3.token');
    writeFileSync(tokenFile, web3.text!, { mode: 0o600 });
    const root = newMachine(join(fleet.dir, 'machines', 'web-3'));
    mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
    writeFileSync(join(root, 'var/lib/dpkg/status'), '');
    const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
    expect(enrolled.code, enrolled.stderr).toBe(0);

    const r = await cli(fleet.checkout, 'status', '--json');
    expect(r.code, r.stderr).toBe(4); // not there yet: web-3 is only enrolled, the others never reported
    const { nodes, summary, unknown } = JSON.parse(r.stdout);
    expect(unknown).toEqual(['db-1', 'solo-1', 'web-1', 'web-2']);
    expect(nodes.map((n: { node: string }) => n.node)).toEqual(['db-1', 'solo-1', 'web-1', 'web-2', 'web-3']);
    expect(nodes.find((n: { node: string }) => n.node === 'web-3')).toMatchObject({ outcome: 'enrolled', signature: 'valid', generation: 1 });
    expect(summary).toMatch(/^5 nodes: 1 enrolled, 4 never enrolled/);
    const history = await cli(fleet.checkout, 'status', '--node', 'web-3', '--json', '--no-fetch');
    expect(history.code, history.stderr).toBe(0);
    expect(JSON.parse(history.stdout)).toMatchObject({ node: 'web-3', entries: [{ signature: 'valid', outcome: 'enrolled' }] });
  });
});

describe('validate and plan read the layout', { timeout: 90_000 }, () => {
  let f: TestFleet;
  const planOf = async (...args: string[]) => {
    const r = await cli(f.checkout, 'plan', '--base', 'HEAD~1', '--no-fetch', ...args);
    expect(r.code, r.stderr).toBe(0);
    return r;
  };
  const nodesOf = async () => JSON.parse((await planOf('--json')).stdout).nodes.map((n: { node: string; because: string[] }) => [n.node, n.because]);

  beforeAll(async () => {
    f = await createFleet();
    for (const [node, group] of [['web-1', 'web'], ['web-2', 'web'], ['db-1', 'db']] as const) {
      const r = await cli(f.checkout, 'token', 'issue', node, '--group', group, '--out', join(f.dir, `${node}.token`));
      expect(r.code, r.stderr).toBe(0);
    }
    await f.commit({
      'nodes/vars.yaml': 'motd: hello\n',
      'nodes/web/vars.yaml': 'port: 8080\n',
      'nodes/web/web-2/vars.yaml': 'port: 9090\n',
      'nodes/web/base.yaml': 'resources:\n  - type: file\n    path: /etc/app.ini\n    template: true\n    content: "port = {{ vars.port }}\\nnode = {{ node.name }}\\n"\n',
      'nodes/db/base.yaml': 'include:\n  - role: roles/motd.yaml\n    with: {text: "{{ vars.motd }} from {{ node.name }}"}\n',
      'roles/motd.yaml': 'params:\n  text: null\nresources:\n  - type: file\n    path: /etc/motd\n    template: true\n    content: "{{ params.text }}\\n"\n',
    }, 'a fleet in groups');
  });
  afterAll(() => f?.close());

  it('validate checks every node wherever it sits and counts no group as a node', async () => {
    const r = await cli(f.checkout, 'validate', '--no-fetch');
    expect(r).toMatchObject({ code: 0, stdout: '' });
    expect(r.stderr).toBe('note: no reports fetched: skipped the check that ineligible nodes are given no resources\nvalid: 3 nodes, 1 role, mesh.yaml\n');
  });

  /** validate --no-fetch with `files` written into the checkout (and removed after): its exit code and its problem lines. */
  const validateWith = async (files: Record<string, string>): Promise<{ code: number; lines: string[] }> => {
    for (const [path, text] of Object.entries(files)) writeFileSync(join(f.checkout, path), text);
    try {
      const r = await cli(f.checkout, 'validate', '--no-fetch');
      return { code: r.code, lines: r.stdout.split('\n').filter(Boolean) };
    } finally {
      for (const path of Object.keys(files)) rmSync(join(f.checkout, path));
    }
  };

  it('validate says how to write a resource whose type is given as a key, as Ansible and Salt write it', async () => {
    expect(await validateWith({ 'nodes/web/shorthand.yaml': 'resources:\n  - file: /etc/motd\n    content: "hi\\n"\n  - package: nginx\n  - directory: srv/app\n' })).toEqual({ code: 1, lines: [
      "nodes/web/shorthand.yaml:2:5: resources.0.type: missing field 'type' (expected one of: file, directory, symlink, package, service, user, group, command); 'file:' is a type, not a field: write 'type: file', and give /etc/motd its own field (path: /etc/motd)",
      "nodes/web/shorthand.yaml:4:5: resources.1.type: missing field 'type' (expected one of: file, directory, symlink, package, service, user, group, command); 'package:' is a type, not a field: write 'type: package', and give nginx its own field (name: nginx)",
      "nodes/web/shorthand.yaml:5:5: resources.2.type: missing field 'type' (expected one of: file, directory, symlink, package, service, user, group, command); 'directory:' is a type, not a field: write 'type: directory', and give srv/app its own field (path: srv/app)",
    ] });
  });

  it('validate says what to write for the fields Puppet, Ansible and Salt use that mesh spells another way, in a declaration and in a role', async () => {
    const declaration = [
      'resources:',
      '  - type: service', '    name: nginx', '    state: started',
      '  - type: file', '    path: /etc/nginx/nginx.conf', '    content: "x\\n"', '    notify: service:nginx',
      '  - type: command', '    name: migrate', '    run: [app, migrate]', '    chdir: /srv/app',
      '  - type: directory', '    path: /srv/app', '    wibble: 1',
      '  - type: file', '    path: /etc/sudoers.d/ops', '    content: "%ops ALL=(ALL) ALL\\n"', '    validate_cmd: visudo -cf %',
      '',
    ].join('\n');
    // A template that does not render no longer hides the rest of its file; a value a template makes is not refused for its braces.
    const templated = 'resources:\n  - type: file\n    path: /etc/app.conf\n    content: "{{ nope }}"\n    template: true\n    mode: "{{ vars.mode }}"\n    subscribe: file:/etc/x\n';
    expect(await validateWith({ 'nodes/web/templated.yaml': templated, 'nodes/web/foreign.yaml': declaration, 'roles/foreign.yaml': 'resources:\n  - type: package\n    name: nginx\n    state: latest\n  - type: exec\n    name: reload\n  - type: package\n    name: curl\n    ensure: installed\n  - type: package\n    name: redis\n    version: latest\n', 'nodes/web/accounts.yaml': 'resources:\n  - type: user\n    name: alice\n    managehome: true\n  - type: ssh_authorized_key\n    name: alice@laptop\n' })).toEqual({ code: 1, lines: [
      "nodes/web/accounts.yaml:4:5: resources.0: unknown field 'managehome': mesh never makes or deletes a home behind your back: declare it as a type: directory owned by the user",
      "nodes/web/accounts.yaml:5:11: resources.1.type: unknown type 'ssh_authorized_key' (expected one of: file, directory, symlink, package, service, user, group, command): mesh declares whole files: write the user's ~/.ssh/authorized_keys as a type: file (owner: the user, mode: \"0600\"), every key a line, and ~/.ssh as a type: directory (mode: \"0700\")",
      "nodes/web/foreign.yaml:4:5: resources.0: unknown field 'state': write running: true (started) or running: false (stopped), and enabled: true or false for at boot",
      "nodes/web/foreign.yaml:8:5: resources.1: unknown field 'notify': mesh has no notify: the resource that reacts names what it watches (a service's restartOn: [/etc/app.conf] restarts it, a command's onChange: [file:/etc/app.conf] runs it)",
      "nodes/web/foreign.yaml:12:5: resources.2: unknown field 'chdir': write cwd:",
      "nodes/web/foreign.yaml:15:5: resources.3: unknown field 'wibble'",
      "nodes/web/foreign.yaml:19:5: resources.4: unknown field 'validate_cmd': write check: [program, args..., '%'] (an argv; % is the new content's path, checked before it takes the file's place)",
      'nodes/web/templated.yaml:4:18: unknown variable nope: a template reads vars, node, facts, secrets',
      "nodes/web/templated.yaml:6:15: unknown variable vars.mode: set it in a vars.yaml (nodes/, the node's groups or the node), or give a fallback with | default: VALUE",
      "nodes/web/templated.yaml:7:5: resources.0: unknown field 'subscribe': mesh has no notify: the resource that reacts names what it watches (a service's restartOn: [/etc/app.conf] restarts it, a command's onChange: [file:/etc/app.conf] runs it)",
      'roles/foreign.yaml:4:5: resources.0: unknown field \'state\': write ensure: present or ensure: absent, and pin a version with version: "1.2-1" (there is no latest: a package is installed once and upgraded when version changes)',
      "roles/foreign.yaml:5:11: resources.1.type: unknown type 'exec' (expected one of: file, directory, symlink, package, service, user, group, command): write type: command (run:, with onChange:, creates:, unless: or onlyif: as its guard)",
      'roles/foreign.yaml:9:13: resources.2.ensure: Invalid option: expected one of "present"|"absent": write ensure: present',
      'roles/foreign.yaml:12:14: resources.3.version: \'latest\' is not a version apt knows: mesh installs a package once and upgrades it when version changes, so give the Debian version to hold (such as "1.22.1-9", as \'apt-cache policy NAME\' lists it), or leave version out to install the candidate',
    ] });
  });

  it('validate says how to write a list given one value or a map, a declaration written as a list of tasks, and a yes, a quoted number or a bare one where the other is meant', async () => {
    expect(await validateWith({
      'nodes/web/shapes.yaml': 'resources:\n  - type: user\n    name: bob\n    groups: wheel\n  - type: service\n    name: app\n    restartOn: /etc/app.conf\n',
      'nodes/web/one.yaml': 'resources:\n  type: file\n  path: /etc/one\n',
      'nodes/web/tasks.yaml': '- type: file\n  path: /etc/motd\n  content: hi\n',
      'nodes/web/words.yaml': 'resources:\n  - type: service\n    name: nginx\n    enabled: yes\n    running: "true"\n  - type: group\n    name: ops\n    gid: "1001"\n  - type: file\n    path: /etc/n\n    content: 12\n',
    })).toEqual({ code: 1, lines: [
      "nodes/web/one.yaml:2:3: resources: must be a list: start each item with '- ', even when there is one",
      "nodes/web/shapes.yaml:4:13: resources.0.groups: must be a list, even of one: write [wheel], or '- wheel' on a line of its own below",
      "nodes/web/shapes.yaml:7:16: resources.1.restartOn: must be a list, even of one: write [/etc/app.conf], or '- /etc/app.conf' on a line of its own below",
      'nodes/web/tasks.yaml:1:1: a declaration is a map, not a list: write resources: on a line of its own above the list, and indent the list under it (roles go under include:)',
      'nodes/web/words.yaml:4:14: resources.0.enabled: must be true or false, not yes (YAML 1.2 reads it as a word)',
      'nodes/web/words.yaml:5:14: resources.0.running: must be true or false, without quotes',
      'nodes/web/words.yaml:8:10: resources.1.gid: must be a number: write 1001 without quotes',
      'nodes/web/words.yaml:11:14: resources.2.content: must be a string: YAML reads 12 as a number; quote it ("12") if you meant the text',
    ] });
  });

  it('validate names the layout\'s problems, renders the files of a group no node is in, and warns of literal templates', async () => {
    const broken: Record<string, string> = {
      'nodes/db/web-2/node.yaml': 'node: web-2\ngeneration: 1\n',
      'nodes/web/web-1/extra/more.yaml': 'resources: []\n',
      'nodes/Bad/base.yaml': 'resources: []\n',
      'nodes/later/eu/base.yaml': 'resources:\n  - type: file\n    path: "/etc/{{ vars.nope }}.conf"\n    content: x\n',
      'nodes/web/literal.yaml': 'resources:\n  - type: file\n    path: /etc/literal\n    content: "port {{ vars.port }}"\n',
    };
    for (const [path, text] of Object.entries(broken)) {
      mkdirSync(join(f.checkout, path, '..'), { recursive: true });
      writeFileSync(join(f.checkout, path), text);
    }
    try {
      const r = await cli(f.checkout, 'validate', '--no-fetch', '--format', 'github');
      expect(r.code).toBe(1);
      expect(r.stdout.split('\n')).toEqual([
        "::error file=nodes/Bad/base.yaml,line=1,col=1::group folder 'Bad' must be lower-case letters, digits and - (as node names are)",
        '::error file=nodes/later/eu/base.yaml,line=3,col=20::unknown variable vars.nope: set it in a vars.yaml (nodes/, the node\'s groups or the node), or give a fallback with | default: VALUE',
        '::error file=nodes/web/web-1/extra/more.yaml,line=1,col=1::nodes/web/web-1/ is a node (it holds node.yaml), so it cannot hold the folder extra/: move groups and nodes out of node folders',
        '::error file=nodes/web/web-2/node.yaml,line=1,col=1::node web-2 is also at nodes/db/web-2/: node names are unique across nodes/ (its report branch is reports/web-2); rename or remove one',
        "::warning file=nodes/web/literal.yaml,line=4,col=14::this body holds '{{ vars.' but is copied literally: add template: true to render it (or leave it, if the braces are the file's own)",
        '::notice::no reports fetched: skipped the check that ineligible nodes are given no resources',
        '',
      ]);
      expect(r.stderr).toBe('4 problems in 4 files (3 nodes, 1 role checked)\n');
      const text = await cli(f.checkout, 'validate', '--no-fetch');
      expect(text.stdout).toContain("nodes/web/literal.yaml:4:14: warning: this body holds '{{ vars.'");
      const json = JSON.parse((await cli(f.checkout, 'validate', '--no-fetch', '--json')).stdout);
      expect(json).toMatchObject({ ok: false, nodes: 3, warnings: [{ file: 'nodes/web/literal.yaml', line: 4, col: 14 }] });
    } finally {
      await git(f.checkout, 'clean', '--quiet', '-fd');
    }
  });

  it('validate takes a role whose short fields its parameters render, and still names what is wrong in it as written', async () => {
    const role = [
      'params:', '  app: null', '  mode: "0640"', '  on: "true"', 'resources:',
      '  - type: file', '    path: /etc/{{ params.app }}.conf', '    mode: "{{ params.mode }}"', '    owner: "{{ params.app }}-admin"', '    content: "x\\n"',
      '  - type: command', '    name: reload-{{ params.app }}', '    run: ["true"]', '    onChange: ["file:/etc/{{ params.app }}.conf"]',
      '  - type: service', '    name: "{{ params.app }}"', '    enabled: "{{ params.on }}"', '',
    ].join('\n');
    const files: Record<string, string> = {
      'roles/app.yaml': role,
      'nodes/db/app.yaml': 'include:\n  - role: roles/app.yaml\n    with: {app: shop}\n',
    };
    const write = (all: Record<string, string>) => {
      for (const [path, text] of Object.entries(all)) writeFileSync(join(f.checkout, path), text);
    };
    try {
      write(files);
      const r = await cli(f.checkout, 'validate', '--no-fetch');
      expect(r.stdout, r.stderr).toBe('');
      expect(r).toMatchObject({ code: 0, stderr: expect.stringContaining('valid: 3 nodes, 2 roles, mesh.yaml\n') });
      // What no rendering changes is still refused in the role itself: a literal mode, an unknown field, a literal name.
      write({ 'roles/app.yaml': role.replace('mode: "{{ params.mode }}"', 'mode: 640').replace('    run: ["true"]', '    run: ["true"]\n    every: 5m').replace('name: "{{ params.app }}"', 'name: "shop app"') });
      const bad = await cli(f.checkout, 'validate', '--no-fetch');
      expect(bad.code).toBe(1);
      expect(bad.stdout.split('\n')).toEqual([
        'roles/app.yaml:8:11: resources.0.mode: mode must be a quoted string such as "0644" (YAML reads 0644 as a number)',
        "roles/app.yaml:14:5: resources.1: unknown field 'every'",
        'roles/app.yaml:17:11: resources.2.name: must be a systemd unit name such as nginx or nginx.service',
        '',
      ]);
    } finally {
      await git(f.checkout, 'checkout', '--quiet', '--', '.');
      await git(f.checkout, 'clean', '--quiet', '-fd');
    }
  });

  it('validate names a mistyped include beside a template error in the same file', async () => {
    writeFileSync(join(f.checkout, 'nodes/web/typo.yaml'), 'include:\n  - role: roles/motdd.yaml\n    with: {text: hi}\nresources:\n  - type: file\n    path: /etc/typo\n    template: true\n    content: "{{ vars.port | frobnicate }}"\n');
    try {
      const r = await cli(f.checkout, 'validate', '--no-fetch');
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('nodes/web/typo.yaml:2:5: include roles/motdd.yaml does not exist at this commit\nnodes/web/typo.yaml:8:15: undefined filter: frobnicate\n');
    } finally {
      rmSync(join(f.checkout, 'nodes/web/typo.yaml'));
    }
  });

  it('plan: a group\'s vars.yaml touches the nodes at or below it that use the value', async () => {
    await f.commit({ 'nodes/web/vars.yaml': 'port: 8081\n' }, 'web: port 8081');
    // web-2 sets its own port: only web-1's rendered declaration changed.
    expect(await nodesOf()).toEqual([['web-1', ['nodes/web/vars.yaml']]]);
    await f.commit({ 'nodes/web/base.yaml': 'resources:\n  - type: file\n    path: /etc/app.ini\n    mode: "0600"\n    template: true\n    content: "port = {{ vars.port }}\\nnode = {{ node.name }}\\n"\n' }, 'web: app.ini 0600');
    expect(await nodesOf()).toEqual([['web-1', ['nodes/web/base.yaml']], ['web-2', ['nodes/web/base.yaml']]]);
    expect((await planOf()).stdout.replace(/^plan \S+:/, 'plan <base>..<head>:').split('\n')).toEqual([
      'plan <base>..<head>: touches 2 nodes; 0 failed their last apply; 0 ineligible; 2 never reported',
      '',
      'web-1, web-2 (changed: nodes/web/base.yaml)',
      '  ~ file:/etc/app.ini: mode set to "0600"',
      '',
      'last reports:',
      '  web-1  never reported',
      '  web-2  never reported',
      'note: no reports fetched: last outcomes and eligibility are unknown',
      '',
    ]);
  });

  it('plan: a role change touches every node that includes it, a fleet-wide variable every node that reads it', async () => {
    await f.commit({ 'roles/motd.yaml': 'params:\n  text: null\nresources:\n  - type: file\n    path: /etc/motd\n    template: true\n    content: "{{ params.text }}!\\n"\n' }, 'motd: !');
    expect(await nodesOf()).toEqual([['db-1', ['roles/motd.yaml']]]);
    await f.commit({ 'nodes/vars.yaml': 'motd: hi\n' }, 'motd: hi');
    expect(await nodesOf()).toEqual([['db-1', ['nodes/vars.yaml']]]);
    // A node moved to another group is the same node: its declaration changed by its new group's files.
    await git(f.checkout, 'mv', 'nodes/db/db-1', 'nodes/web/db-1');
    await f.commit({}, 'db-1 moves to web');
    expect(await nodesOf()).toEqual([['db-1', ['nodes/db/db-1/node.yaml', 'nodes/web/db-1/node.yaml']]]);
  });

  it('set --plan prints the plan of the working tree against HEAD, and commits nothing', async () => {
    const head = await git(f.checkout, 'rev-parse', 'HEAD');
    const r = await cli(f.checkout, 'set', 'nodes/web/vars.yaml', 'port=8181', '--plan', '--no-fetch');
    expect(r.code, r.stderr).toBe(0);
    // web-2 sets its own port; db-1 moved into web above.
    const lines = r.stdout.replace(/^plan \S+:/m, 'plan <base>..<head>:').split('\n');
    expect(lines.slice(0, 3)).toEqual(['nodes/web/vars.yaml: port: 8081 -> 8181', '', 'plan <base>..<head>: touches 2 nodes; 0 failed their last apply; 0 ineligible; 2 never reported']);
    expect(r.stdout).toContain('\nweb-1 (changed: nodes/web/vars.yaml)\n  ~ file:/etc/app.ini: content');
    expect(r.stdout).toContain('\n      -port = 8081\n      +port = 8181\n');
    const json = JSON.parse((await cli(f.checkout, 'set', 'nodes/web/vars.yaml', 'port=8282', '--plan', '--no-fetch', '--json')).stdout);
    expect(json).toMatchObject({ changes: [{ key: 'port', before: 8181, after: 8282 }] });
    expect(json.plan.nodes.map((n: { node: string }) => n.node)).toEqual(['db-1', 'web-1']);
    expect(await git(f.checkout, 'rev-parse', 'HEAD')).toBe(head);
    expect(await git(f.checkout, 'status', '--porcelain')).toBe('M nodes/web/vars.yaml'); // unstaged (the helper trims the leading space)
    expect(await git(f.checkout, 'diff', '--cached', '--name-only')).toBe(''); // the index is as it was
    await git(f.checkout, 'checkout', '--', 'nodes/web/vars.yaml');
  });

  it('set refuses a change that would make the file invalid (mesh.yaml, a vars.yaml, a declaration), writing nothing; a file that already had the problem still takes other changes', async () => {
    /** `problem`: the start of the first problem's line, place included. */
    const refused = async (file: string, assignment: string, problem: string) => {
      const before = existsSync(join(f.checkout, file)) ? readFileSync(join(f.checkout, file), 'utf8') : null;
      const r = await cli(f.checkout, 'set', file, assignment);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`${join(f.checkout, file)}, as this change would leave it, is invalid:\n  ${problem}`);
      expect(r.stderr).toContain('\nnothing was written: give a value of the form the problem names, or fix the file first');
      expect(existsSync(join(f.checkout, file)) ? readFileSync(join(f.checkout, file), 'utf8') : null).toBe(before);
    };
    const meshYaml = readFileSync(join(f.checkout, 'mesh.yaml'), 'utf8').split('\n');
    const lineOf = (key: string) => meshYaml.findIndex((l) => l.startsWith(`${key}:`)) + 1;
    await refused('mesh.yaml', 'trust=nonee', `mesh.yaml:${lineOf('trust')}:8: trust: Invalid option: expected one of "signed"|"none"`);
    await refused('mesh.yaml', 'name=', `mesh.yaml:${lineOf('name')}:7: name: Too small: expected string to have >=1 characters`);
    await refused('nodes/vars.yaml', 'app-port=80', "nodes/vars.yaml:2:1: 'app-port': a variable name is letters, digits and _");
    await refused('nodes/web/web-1/vars.yaml', 'app-port=80', "nodes/web/web-1/vars.yaml:1:1: 'app-port': a variable name is letters, digits and _"); // a new file
    await refused('nodes/web/base.yaml', 'resources=3', "nodes/web/base.yaml:1:12: resources: must be a list, even of one: write [3]");
    expect(await git(f.checkout, 'status', '--porcelain')).toBe('');
    // A file that already has a problem: a change that adds none is written (set is how a pipeline fixes it, one key at a time).
    writeFileSync(join(f.checkout, 'nodes/vars.yaml'), 'app-port: 80\n');
    const fixed = await cli(f.checkout, 'set', 'nodes/vars.yaml', 'app_port=80');
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(readFileSync(join(f.checkout, 'nodes/vars.yaml'), 'utf8')).toBe('app-port: 80\napp_port: 80\n');
    await git(f.checkout, 'checkout', '--', 'nodes/vars.yaml');
    // A YAML file that mesh does not read is changed as before.
    mkdirSync(join(f.checkout, 'deploy'));
    const other = await cli(f.checkout, 'set', 'deploy/settings.yaml', 'trust=anything');
    expect(other.code, other.stderr).toBe(0);
    rmSync(join(f.checkout, 'deploy'), { recursive: true });
  });

  it('plan shows a node whose declaration does not render as "will fail: nothing applied", never as removing its resources', async () => {
    await f.commit({ 'nodes/web/vars.yaml': 'prot: 8080\n' }, 'a typo in a variable name');
    const r = await cli(f.checkout, 'plan', '--base', 'HEAD~1', '--no-fetch');
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('web-1 (changed: nodes/web/vars.yaml)\n  will fail: nothing applied (the host keeps its last good declaration and reports these)\n    nodes/web/base.yaml:');
    expect(r.stdout).not.toContain('- file:/etc/app.ini');
    const md = await cli(f.checkout, 'plan', '--base', 'HEAD~1', '--no-fetch', '--format', 'markdown');
    expect(md.stdout).toContain('**Will fail: nothing applied.**');
    await f.commit({ 'nodes/web/vars.yaml': 'port: 8080\n' }, 'fix the typo');
  });

  it('retire says which of its groups\' files still give the node resources', async () => {
    const r = await cli(f.checkout, 'retire', 'web-2');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').slice(-2)).toEqual([
      "note: its groups' files (nodes/web/base.yaml) still give web-2 resources; retire leaves them, as they are other nodes' too. Its host applies none of them while it is retired",
      '',
    ]);
    expect(await git(f.checkout, 'show', '--name-only', '--format=%s', 'HEAD')).toBe('retire web-2: empty declaration\n\nnodes/web/web-2/node.yaml\nnodes/web/web-2/vars.yaml');
    // The retire commit passes validate: the group's files are web-1's too. A file of its own would not.
    expect((await cli(f.checkout, 'validate', '--no-fetch')).code).toBe(0);
    await f.commit({ 'nodes/web/web-2/own.yaml': 'resources:\n  - type: directory\n    path: /srv/own\n' }, 'web-2: own');
    const own = await cli(f.checkout, 'validate', '--no-fetch');
    expect(own.code).toBe(1);
    expect(own.stdout).toContain("nodes/web/web-2/own.yaml:2:5: node web-2 is given resources by nodes/web/web-2/, but it is retired (node.yaml says retired: true); it may only have an empty declaration: remove them (its groups' files are not applied to it)");
  });
});

describe('plan of HEAD and the working tree', { timeout: 60_000 }, () => {
  let f: TestFleet;
  beforeAll(async () => {
    f = await createFleet();
    expect((await cli(f.checkout, 'token', 'issue', 'web-1', '--group', 'web', '--out', join(f.dir, 'web-1.token'))).code).toBe(0);
    await f.commit({ 'nodes/web/vars.yaml': 'port: 8080\n' }, 'web vars');
  });
  afterAll(async () => f?.close());

  it('says when the working tree has changes the plan leaves out (validate reads them)', async () => {
    writeFileSync(join(f.checkout, 'nodes/web/vars.yaml'), 'port: 9090\n');
    writeFileSync(join(f.checkout, 'nodes/web/extra.yaml'), 'resources: []\n');
    const r = await cli(f.checkout, 'plan', '--base', 'HEAD~1', '--no-fetch');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('note: the working tree has changes not committed (nodes/web/vars.yaml, nodes/web/extra.yaml): this plan is of HEAD, without them; commit them to plan them\n');
    expect((await cli(f.checkout, 'plan', '--base', 'HEAD~1', '--head', 'HEAD~0', '--no-fetch')).stdout).not.toContain('working tree');
    await git(f.checkout, 'checkout', '--', 'nodes/web/vars.yaml');
    rmSync(join(f.checkout, 'nodes/web/extra.yaml'));
    expect((await cli(f.checkout, 'plan', '--base', 'HEAD~1', '--no-fetch')).stdout).not.toContain('working tree');
  });
});
