/**
 * `--noop`, as a Puppet user reaches for it: what a pass would change on this machine, per
 * resource, with content diffs (secrets elided), changing nothing — every byte under the root,
 * the store included, is the same afterwards (only the host's git object cache may fetch) — and
 * no report pushed. Exit 4 when something would change, 0 when nothing would, 1 when the plan
 * itself fails. Through the built mesh-host, on simulated machines.
 */
import { chmodSync, mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MESH_HOST, cli, createFleet, hostCmd, newMachine, runProgram } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

/** The whole root, mesh-host's store and trust state included; only the git object cache is left out. */
const everything = (root: string) => snapshot(root, '', ['var/lib/mesh-host/git']);

const DECLARATION = `resources:
  - type: file
    path: /etc/motd
    content: "welcome\\n"
  - type: file
    path: /etc/app.ini
    content: "[db]\\nhost = db-1\\npassword = hunter2\\n"
    mode: "0640"
  - type: file
    path: /etc/keep
    content: "kept\\n"
    mode: "0644"
  - type: directory
    path: /srv/app
  - type: command
    name: reload
    run: [/bin/true]
    onChange: [file:/etc/app.ini]
`;

describe('mesh-host apply --bundle --noop', () => {
  const apply = (root: string, bundle: string, ...args: string[]) => runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--root', root, ...args], root);

  function applied(): { root: string; bundle: string } {
    const dir = tempDir('mesh-noop-');
    const root = newMachine(join(dir, 'root'));
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'base.yaml'), DECLARATION);
    return { root, bundle };
  }

  it('on a drifted machine lists exactly the drifted resources, with diffs (secrets elided), and changes no byte; exit 4', async () => {
    const { root, bundle } = applied();
    expect((await apply(root, bundle)).code).toBe(0);
    writeFileSync(join(root, 'etc/app.ini'), '[db]\nhost = db-2\npassword = letmein\n');
    unlinkSync(join(root, 'etc/motd'));
    chmodSync(join(root, 'etc/keep'), 0o600);
    const before = everything(root);
    const r = await apply(root, bundle, '--noop', '--json');
    expect(r.code, r.stderr).toBe(4);
    const out = JSON.parse(r.stdout);
    expect(out.changes.map((l: { id: string; action: string }) => `${l.action} ${l.id}`)).toEqual([
      'create file:/etc/motd', 'update file:/etc/app.ini', 'update file:/etc/keep', 'run command:reload',
    ]);
    const ini = out.changes.find((l: { id: string }) => l.id === 'file:/etc/app.ini');
    expect(ini).toMatchObject({ drift: true, changes: ['content differs'] });
    expect(ini.diff).toEqual(['@@ -1,3 +1,3 @@', ' [db]', '-host = db-2', '-password = «elided»', '+host = db-1', '+password = «elided»']);
    expect(JSON.stringify(out)).not.toMatch(/hunter2|letmein/);
    expect(out.changes.find((l: { id: string }) => l.id === 'command:reload').changes).toEqual(['file:/etc/app.ini would change']);
    expect(out.inSync).toBe(1); // the directory
    expect(everything(root)).toEqual(before);

    const text = await apply(root, bundle, '--noop');
    expect(text.stdout.split('\n')[0]).toBe('noop (nothing was changed): 4 would change, 1 in sync');
    expect(text.stdout).toContain('  would update   file:/etc/app.ini (content differs) [drift]\n      @@ -1,3 +1,3 @@');
    expect(everything(root)).toEqual(before);

    expect((await apply(root, bundle)).code).toBe(0); // the real pass repairs it
    const clean = await apply(root, bundle, '--noop', '--json');
    expect(clean.code).toBe(0);
    expect(JSON.parse(clean.stdout)).toMatchObject({ changes: [], inSync: 5, problems: [] });
  });

  it('says what un-declaring would remove, and exits 1 when the declaration does not load', async () => {
    const { root, bundle } = applied();
    await apply(root, bundle);
    writeFileSync(join(bundle, 'base.yaml'), 'resources:\n  - type: file\n    path: /etc/motd\n    content: "welcome\\n"\n');
    const before = everything(root);
    const out = JSON.parse((await apply(root, bundle, '--noop', '--json')).stdout);
    expect(out.changes.map((l: { id: string; action: string }) => `${l.action} ${l.id}`)).toEqual(['remove directory:/srv/app', 'remove file:/etc/keep', 'remove file:/etc/app.ini']);
    writeFileSync(join(bundle, 'base.yaml'), 'resources:\n  - type: file\n    path: /etc/motd\n    mode: 644\n');
    const bad = await apply(root, bundle, '--noop');
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/^  problem   .*base\.yaml:4:\d+: /m);
    expect(everything(root)).toEqual(before);
  });
});

describe('mesh-host run --once --noop', () => {
  it('plans the new commit against the machine, changes nothing, pushes no report; a real pass then does what it said', async () => {
    const fleet = await createFleet();
    try {
      const root = await fleet.enrol('web-1');
      await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "one\\n"\n' }, 'one');
      expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
      const two = await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "two\\n"\n' }, 'two');
      const before = everything(root);
      const noop = await hostCmd(root, 'run', '--once', '--noop');
      expect(noop.code, noop.stderr).toBe(4);
      expect(noop.stdout).toBe(`noop at ${two.slice(0, 12)} (nothing was changed): 1 would change, 0 in sync\n  would update   file:/etc/motd (content differs)\n      @@ -1,1 +1,1 @@\n      -one\n      +two\n`);
      expect(everything(root)).toEqual(before);
      const status = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout);
      expect(status.nodes[0]).toMatchObject({ node: 'web-1', sequence: 2 }); // the enrolment and the first pass: nothing from --noop
      expect((await hostCmd(root, 'run', '--noop')).code).toBe(2); // one pass only
      const real = JSON.parse((await hostCmd(root, 'run', '--once', '--json')).stdout);
      expect(real).toMatchObject({ outcome: 'applied', commit: two, resources: [{ id: 'file:/etc/motd', result: 'updated' }] });
      expect((await hostCmd(root, 'run', '--once', '--noop')).code).toBe(0);
    } finally {
      await fleet.close();
    }
  });
});
