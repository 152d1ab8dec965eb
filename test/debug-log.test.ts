/**
 * `--log-level debug` (or MESH_LOG_LEVEL=debug), as a Puppet user reaches for `--debug`: a pass
 * says what it does, step by step, as pino JSON lines on stderr (README, "what each level
 * carries"), and nothing of it at the default level. Through the built mesh-host, on simulated
 * machines.
 */
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MESH_HOST, createFleet, newMachine, runProgram } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

const DECLARATION = `resources:
  - type: directory
    path: /srv/app
  - type: file
    path: /srv/app/a.conf
    content: "a\\n"
  - type: file
    path: /srv/app/b.conf
    content: "password = hunter2\\n"
`;

interface Line { level: number; msg: string; [field: string]: unknown }

/** The pino lines of a run's stderr. */
const lines = (stderr: string): Line[] => stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line);
const debugLines = (stderr: string) => lines(stderr).filter((l) => l.level === 20);

describe('mesh-host at log level debug', () => {
  const apply = (root: string, bundle: string, env: Record<string, string>, ...args: string[]) => runProgram('node', [MESH_HOST, ...args, 'apply', '--bundle', bundle, '--root', root], root, env);

  it('apply --bundle: the declaration, what was observed, the plan step by step and the outcome; none at the default level', async () => {
    const dir = tempDir('mesh-debug-');
    const root = newMachine(join(dir, 'root'));
    mkdirSync(join(root, 'srv'), { recursive: true });
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'base.yaml'), DECLARATION);

    const first = await apply(root, bundle, { MESH_LOG_LEVEL: 'debug' });
    expect(first.code, first.stderr).toBe(0);
    const said = debugLines(first.stderr);
    expect(said.map((l) => l.msg)).toEqual(['declaration loaded', 'observed', 'planned', 'to change', 'to change', 'to change', 'declaration applied', 'store written']);
    expect(said[0]).toMatchObject({ name: 'mesh-host', commit: null, resources: 3, files: 1 });
    expect(said[0]!.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(said[2]).toMatchObject({ change: 3, keep: 0, remove: 0, adopt: 0 });
    expect(said.slice(3, 6).map((l) => [l.id, l.action])).toEqual([['directory:/srv/app', 'create'], ['file:/srv/app/a.conf', 'create'], ['file:/srv/app/b.conf', 'create']]);
    expect(said[6]).toMatchObject({ outcome: 'applied', changed: 3, failed: 0 });
    expect(said[7]).toMatchObject({ why: 'pass', records: 3, epoch: 1 });
    for (const l of said) if ('ms' in l) expect(typeof l.ms).toBe('number');
    expect(first.stderr).not.toContain('hunter2'); // a line says what changes, never a value

    // Drift: exactly the drifted resources are named, as drift; the option does what the variable does.
    writeFileSync(join(root, 'srv/app/a.conf'), 'edited by hand\n');
    unlinkSync(join(root, 'srv/app/b.conf'));
    const drift = await apply(root, bundle, {}, '--log-level', 'debug');
    expect(drift.code, drift.stderr).toBe(0);
    const steps = debugLines(drift.stderr).filter((l) => l.msg === 'to change');
    expect(steps).toEqual([
      expect.objectContaining({ id: 'file:/srv/app/a.conf', action: 'update', changes: ['content differs'], drift: true }),
      expect.objectContaining({ id: 'file:/srv/app/b.conf', action: 'create', drift: true }),
    ]);
    expect(debugLines(drift.stderr).find((l) => l.msg === 'planned')).toMatchObject({ change: 2, keep: 1 });

    // --noop: what it read and what it would do; no store write, no plan step by step (the preview is the output).
    writeFileSync(join(root, 'srv/app/a.conf'), 'edited again\n');
    const noop = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--root', root, '--noop'], root, { MESH_LOG_LEVEL: 'debug' });
    expect(noop.code, noop.stderr).toBe(4); // something would change
    expect(debugLines(noop.stderr)).toEqual([
      expect.objectContaining({ msg: 'observed', resources: 3, unreadable: 0 }),
      expect.objectContaining({ msg: 'previewed', lines: 1, inSync: 2, problems: 0 }),
    ]);
    expect(noop.stderr).not.toContain('hunter2');
    writeFileSync(join(root, 'srv/app/a.conf'), 'a\n');

    // The default level (info) and warn: no debug line.
    writeFileSync(join(root, 'srv/app/a.conf'), 'again\n');
    const quiet = await apply(root, bundle, { MESH_LOG_LEVEL: 'info' });
    expect(quiet.code).toBe(0);
    expect(lines(quiet.stderr)).toEqual([]);
    writeFileSync(join(bundle, 'more.yaml'), 'resources:\n  - type: file\n    path: /srv/app/c.conf\n    content: "c\\n"\n');
    const noDebug = await apply(root, bundle, {}, '--log-level', 'warn');
    expect(noDebug.code).toBe(0);
    expect(debugLines(noDebug.stderr)).toEqual([]);
  });

  it('run --once: main polled, the pass and the report it pushed', { timeout: 60_000 }, async () => {
    const fleet = await createFleet();
    try {
      const root = await fleet.enrol('web-1');
      const tip = await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "one\\n"\n' }, 'one');
      const r = await runProgram('node', [MESH_HOST, 'run', '--once', '--root', root], root, { MESH_LOG_LEVEL: 'debug' });
      expect(r.code, r.stderr).toBe(0);
      const said = debugLines(r.stderr);
      expect(said.map((l) => l.msg)).toEqual(['main polled and fetched', 'declaration loaded', 'observed', 'planned', 'to change', 'declaration applied', 'store written', 'store written', 'store written', 'report']);
      expect(said[0]).toMatchObject({ branch: 'main', commit: tip, fetched: true });
      expect(said[1]).toMatchObject({ commit: tip, resources: 1 });
      expect(said[4]).toMatchObject({ id: 'file:/etc/motd', action: 'create' });
      expect(said.slice(6, 9).map((l) => l.why)).toEqual(['pass', 'report made', 'report sent']);
      expect(said[9]).toMatchObject({ delivery: 'pushed', sequence: 2 });
      const again = await runProgram('node', [MESH_HOST, 'run', '--once', '--root', root], root, { MESH_LOG_LEVEL: 'debug' });
      expect(debugLines(again.stderr)[0]).toMatchObject({ msg: 'main polled: not moved', commit: tip, fetched: false });
    } finally {
      await fleet.close();
    }
  });
});
