/**
 * The `command` resource end to end: the built mesh-host applies a bundle to a temporary root
 * (`mesh-host apply --bundle DIR --root ROOT --json`), and the commands under test write under
 * $MESH_ROOT so that what ran, and how often, is read from the root. Crashes are real SIGKILLs
 * at the points of agent/fault.ts (MESH_FAULT); validation errors come from the built mesh-cli.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tail } from '../agent/resources/program-output.js';
import { emptyStore, openStore } from '../agent/store/store.js';
import { cli, git, MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

interface Line {
  id: string;
  result: string;
  changes?: string[];
  error?: string;
  exit?: number;
  output?: string;
}
interface Body {
  outcome: string;
  errors: Array<{ file?: string; line?: number; col?: number; message: string }>;
  resources: Line[];
}

function machine(): string {
  return newMachine(join(tempDir('mesh-cmd-'), 'root'));
}

/** One pass of `resources` (the resources: list) on `root`; `fault` is a MESH_FAULT spec. */
async function apply(root: string, resources: string, fault?: string): Promise<{ code: number; body: Body | null; stderr: string }> {
  const bundle = join(root, '..', 'bundle');
  rmSync(bundle, { recursive: true, force: true });
  mkdirSync(bundle);
  writeFileSync(join(bundle, 'base.yaml'), resources ? `resources:\n${resources}` : 'resources: []\n');
  const run = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--json', '--root', root], root, fault ? { MESH_FAULT: fault } : {});
  return { code: run.code, body: run.stdout.trim() ? (JSON.parse(run.stdout) as Body) : null, stderr: run.stderr };
}

/** The lines of a pass that must have completed. */
async function pass(root: string, resources: string): Promise<Line[]> {
  const { body, stderr } = await apply(root, resources);
  if (!body) throw new Error(`mesh-host apply printed nothing: ${stderr}`);
  return body.resources;
}

const command = (id: string, lines: Line[]) => lines.find((l) => l.id === id);
const ranLog = (root: string) => (existsSync(join(root, 'ran.log')) ? readFileSync(join(root, 'ran.log'), 'utf8') : '');
const store = (root: string) => JSON.parse(readFileSync(join(root, 'var/lib/mesh-host/store.json'), 'utf8')) as { owned: Array<{ id: string }>; pending?: string[] };

/** A file and a command that appends to $MESH_ROOT/ran.log when the file changes. */
const watched = (content: string, run = `[sh, -c, 'echo ran >> "$MESH_ROOT/ran.log"']`) =>
  `  - type: file\n    path: /etc/app.ini\n    content: "${content}\\n"\n  - type: command\n    name: reload\n    run: ${run}\n    onChange: ["file:/etc/app.ini"]\n`;

describe('command: when it runs', () => {
  it('runs once when a watched file changes, not on the next unchanged pass, in the root with MESH_ROOT, and reports its exit status and output', async () => {
    const root = machine();
    const run = `[sh, -c, 'echo ran >> "$MESH_ROOT/ran.log"; echo "in $(pwd)"; echo warned >&2']`;
    expect(await pass(root, watched('port = 1', run))).toEqual([
      { id: 'file:/etc/app.ini', result: 'created', changes: ['absent, should be a file'] },
      { id: 'command:reload', result: 'updated', changes: ['ran: file:/etc/app.ini changed'], exit: 0, output: `in ${root}\nwarned` },
    ]);
    expect(await pass(root, watched('port = 1', run))).toEqual([
      { id: 'file:/etc/app.ini', result: 'unchanged' },
      { id: 'command:reload', result: 'unchanged' },
    ]);
    expect(command('command:reload', await pass(root, watched('port = 2', run)))).toMatchObject({ result: 'updated', changes: ['ran: file:/etc/app.ini changed'] });
    expect(ranLog(root)).toBe('ran\nran\n');
  });

  it('with creates, runs while the path is missing and fails when the command does not make it', async () => {
    const root = machine();
    const decl = (run: string) => `  - type: command\n    name: init\n    run: ${run}\n    creates: /srv/app/.initialized\n`;
    const lazy = await pass(root, decl(`[sh, -c, 'echo ran >> "$MESH_ROOT/ran.log"']`));
    expect(lazy).toEqual([{ id: 'command:init', result: 'failed', changes: ['ran: /srv/app/.initialized is missing'], exit: 0, error: 'exited 0, but /srv/app/.initialized (creates) does not exist afterwards' }]);
    const make = decl(`[sh, -c, 'mkdir -p "$MESH_ROOT/srv/app" && touch "$MESH_ROOT/srv/app/.initialized" && echo ran >> "$MESH_ROOT/ran.log"']`);
    expect(await pass(root, make)).toEqual([{ id: 'command:init', result: 'updated', changes: ['ran: /srv/app/.initialized is missing'], exit: 0 }]);
    expect(await pass(root, make)).toEqual([{ id: 'command:init', result: 'unchanged' }]);
    expect(ranLog(root)).toBe('ran\nran\n');
  });

  it('with unless, runs only while unless exits non-zero', async () => {
    const root = machine();
    const decl = `  - type: command\n    name: mark\n    run: [sh, -c, 'echo ran >> "$MESH_ROOT/ran.log"']\n    unless: [grep, -q, ran, ran.log]\n`;
    expect(await pass(root, decl)).toEqual([{ id: 'command:mark', result: 'updated', changes: ['ran: unless [grep, -q, ran, ran.log] exited 2'], exit: 0 }]);
    expect(await pass(root, decl)).toEqual([{ id: 'command:mark', result: 'unchanged' }]);
    expect(ranLog(root)).toBe('ran\n');
  });

  it('with onlyif, runs only while onlyif exits 0', async () => {
    const root = machine();
    const decl = `  - type: command\n    name: mark\n    run: [sh, -c, 'echo ran >> "$MESH_ROOT/ran.log"']\n    onlyif: [test, '!', -e, ran.log]\n`;
    expect(await pass(root, decl)).toEqual([{ id: 'command:mark', result: 'updated', changes: ["ran: onlyif [test, !, -e, ran.log] exited 0"], exit: 0 }]);
    expect(await pass(root, decl)).toEqual([{ id: 'command:mark', result: 'unchanged' }]);
    expect(ranLog(root)).toBe('ran\n');
  });

  it('runs as user (with the groups etc/group gives it) in cwd with environment added (made first where declared, its guard too), and a user nobody declares fails the pass before any change', async () => {
    const root = machine();
    const decl =
      `  - type: command\n    name: migrate\n    run: [sh, -c, 'echo "$(id -u):$(id -g) $(id -G) $(pwd) $HOME $USER $LOGNAME $APP_ENV $MESH_ROOT"']\n    onlyif: [sh, -c, 'test "$(id -u)" != 0']\n` +
      `    user: app\n    cwd: /srv/app\n    environment: { APP_ENV: production }\n` +
      `  - type: directory\n    path: /srv/app\n  - type: directory\n    path: /srv\n  - type: user\n    name: app\n    home: /home/app\n    groups: [deploy]\n  - type: group\n    name: deploy\n`;
    const lines = await pass(root, decl);
    const deploy = readFileSync(join(root, 'etc/group'), 'utf8').split('\n').find((l) => l.startsWith('deploy:'))!.split(':');
    const app = readFileSync(join(root, 'etc/passwd'), 'utf8').split('\n').find((l) => l.startsWith('app:'))!.split(':');
    expect(command('command:migrate', lines)).toEqual({ id: 'command:migrate', result: 'updated', changes: ['ran: onlyif [sh, -c, test "$(id -u)" != 0] exited 0'], exit: 0, output: `${app[2]}:${app[3]} ${[Number(app[3]), Number(deploy[2])].sort((a, b) => a - b).join(' ')} ${join(root, 'srv/app')} /home/app app app production ${root}` });
    // Made before the command that needs them, wherever declared.
    expect(lines.map((l) => l.id)).toEqual(['group:deploy', 'user:app', 'directory:/srv', 'directory:/srv/app', 'command:migrate']);

    const other = machine();
    const { code, body } = await apply(other, `  - type: file\n    path: /etc/motd\n    content: "x"\n  - type: command\n    name: as-nobody\n    run: ['true']\n    user: nobody-here\n`);
    expect(code).toBe(1);
    expect(body!.resources).toEqual([
      { id: 'file:/etc/motd', result: 'skipped', error: 'nothing applied: pre-flight found 1 problem(s) in this declaration' },
      { id: 'command:as-nobody', result: 'failed', error: "user 'nobody-here' is neither a user on this machine nor declared as a user resource" },
    ]);
    expect(existsSync(join(other, 'etc/motd'))).toBe(false);
  });

  it('with tries, runs again (trySleep apart) until it succeeds or the tries are spent; with returns, those statuses are success (as Puppet\'s exec)', async () => {
    const root = machine();
    // Fails until its third run: a counter in the root.
    const flaky = (extra: string) =>
      `  - type: command\n    name: flaky\n    run: [sh, -c, 'n=$(cat "$MESH_ROOT/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$MESH_ROOT/n"; echo "try $n"; [ $n -ge 3 ]']\n    creates: /done\n${extra}`;
    const spent = await pass(root, flaky('    tries: 2\n    trySleep: 100ms\n'));
    expect(command('command:flaky', spent)).toEqual({ id: 'command:flaky', result: 'failed', changes: ['ran: /done is missing (try 2 of 2)'], error: 'exited with status 1, 2 tries', exit: 1, output: 'try 2' });
    writeFileSync(join(root, 'n'), '0\n');
    const started = Date.now();
    const lines = await pass(root, flaky('    tries: 3\n    trySleep: 300ms\n').replace('[ $n -ge 3 ]', '[ $n -ge 3 ] && touch "$MESH_ROOT/done"'));
    expect(command('command:flaky', lines)).toEqual({ id: 'command:flaky', result: 'updated', changes: ['ran: /done is missing (try 3 of 3)'], exit: 0, output: 'try 3' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(600); // two waits of 300 ms
    expect(readFileSync(join(root, 'n'), 'utf8')).toBe('3\n');

    const returns = `  - type: command\n    name: two\n    run: [sh, -c, 'exit 2']\n    returns: [0, 2]\n    creates: /nothing\n`;
    expect(command('command:two', await pass(root, returns))).toMatchObject({ result: 'failed', error: 'exited 2, but /nothing (creates) does not exist afterwards', exit: 2 });
    expect(command('command:three', await pass(root, returns.replace('two', 'three').replace("'exit 2'", "'exit 3'")))).toMatchObject({ result: 'failed', error: 'exited with status 3 (success is 0 or 2)' });
    const { body } = await apply(root, `  - type: command\n    name: sleepy\n    run: ['true']\n    trySleep: 5s\n`);
    expect(body!.errors.map((e) => e.message)).toEqual([expect.stringContaining('trySleep waits between tries: give tries (2 or more), or drop trySleep')]);
  });

  it('with no onChange, creates, unless or onlyif, runs on every pass (as an exec without guards does)', async () => {
    const root = machine();
    const decl = `  - type: command\n    name: always\n    run: [sh, -c, 'echo ran >> "$MESH_ROOT/ran.log"']\n`;
    const line = { id: 'command:always', result: 'updated', changes: ['ran: it has no onChange, creates, unless or onlyif, so it runs on every pass'], exit: 0 };
    expect(await pass(root, decl)).toEqual([line]);
    expect(await pass(root, decl)).toEqual([line]);
    expect(ranLog(root)).toBe('ran\nran\n');
  });

  it('with shell: true, runs one string through /bin/sh -c', async () => {
    const root = machine();
    const lines = await pass(root, watched('a', `'for n in 1 2; do echo "line $n"; done | tee -a "$MESH_ROOT/ran.log"'\n    shell: true`));
    expect(command('command:reload', lines)).toEqual({ id: 'command:reload', result: 'updated', changes: ['ran: file:/etc/app.ini changed'], exit: 0, output: 'line 1\nline 2' });
    expect(ranLog(root)).toBe('line 1\nline 2\n');
  });

  it('is killed with its children when it runs past its timeout, and the line says so', async () => {
    const root = machine();
    const started = Date.now();
    const lines = await pass(root, watched('a', `'echo started; sleep 30; echo never'\n    shell: true\n    timeout: 1s`));
    expect(command('command:reload', lines)).toEqual({ id: 'command:reload', result: 'failed', changes: ['ran: file:/etc/app.ini changed'], error: 'ran past its timeout of 1s and was killed', output: 'started' });
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('renders run only with template: true, and short fields always', async () => {
    const root = machine();
    const bundle = join(root, '..', 'bundle');
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'vars.yaml'), 'name: web\n');
    const decl = (template: string) =>
      `resources:\n  - type: command\n    name: "greet-{{ vars.name }}"\n    run: [sh, -c, 'echo "{{ vars.name }}" >> "$MESH_ROOT/ran.log"']\n    creates: /nothing\n${template}`;
    writeFileSync(join(bundle, 'base.yaml'), decl(''));
    const literal = JSON.parse((await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--json', '--root', root], root)).stdout) as Body;
    expect(literal.resources.map((l) => l.id)).toEqual(['command:greet-web']);
    writeFileSync(join(bundle, 'base.yaml'), decl('    template: true\n'));
    await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--json', '--root', root], root);
    expect(ranLog(root)).toBe('{{ vars.name }}\nweb\n');
  });
});

describe('command: a failure, and the durable trigger', () => {
  it('exits 1: the line fails, it is retried on the next pass and fails again, and the trigger is cleared once it succeeds', async () => {
    const root = machine();
    const run = `[sh, -c, 'echo try >> "$MESH_ROOT/ran.log"; test -e "$MESH_ROOT/ok" || { echo "not ready"; exit 1; }']`;
    const failed = { id: 'command:reload', result: 'failed', error: 'exited with status 1', exit: 1, output: 'not ready' };
    const first = await apply(root, watched('a', run));
    expect(first.code).toBe(1);
    expect(first.body!.outcome).toBe('failed');
    expect(command('command:reload', first.body!.resources)).toEqual({ ...failed, changes: ['ran: file:/etc/app.ini changed'] });
    expect(store(root).pending).toEqual(['command:reload']);
    const again = await apply(root, watched('a', run));
    expect(again.code).toBe(1);
    expect(again.body!.resources).toEqual([{ id: 'file:/etc/app.ini', result: 'unchanged' }, { ...failed, changes: ['ran: a change it watches is pending from an earlier pass'] }]);
    writeFileSync(join(root, 'ok'), '');
    expect(command('command:reload', await pass(root, watched('a', run)))).toEqual({ id: 'command:reload', result: 'updated', changes: ['ran: a change it watches is pending from an earlier pass'], exit: 0 });
    expect(store(root).pending).toBeUndefined();
    expect(command('command:reload', await pass(root, watched('a', run)))).toEqual({ id: 'command:reload', result: 'unchanged' });
    expect(ranLog(root)).toBe('try\ntry\ntry\n');
  });

  it('does not run while a resource it watches failed in the pass, and stays pending until it applies', async () => {
    const root = machine();
    mkdirSync(join(root, 'etc/app.ini')); // a folder where the file should be: its change fails after its intent
    const decl =
      `  - type: file\n    path: /etc/other.ini\n    content: "x\\n"\n` +
      watched('a').replace('onChange: ["file:/etc/app.ini"]', 'onChange: ["file:/etc/other.ini", "file:/etc/app.ini"]');
    const blocked = await apply(root, decl);
    expect(blocked.code).toBe(1);
    expect(blocked.body!.resources).toEqual([
      { id: 'file:/etc/other.ini', result: 'created', changes: ['absent, should be a file'] },
      { id: 'file:/etc/app.ini', result: 'failed', changes: ['is a directory, should be a file'], error: '/etc/app.ini is a directory, not a file: remove it or declare it as what it is' },
      { id: 'command:reload', result: 'skipped', error: 'pending: not run, because file:/etc/app.ini failed in this pass; it runs once what it watches applies cleanly' },
    ]);
    expect(pendingMarks(root)).toEqual(['command:reload']);
    const state = await runProgram('node', [MESH_HOST, 'state', '--root', root], root);
    expect(state.stdout).toContain('pending: command:reload (a change it watches calls for it; it runs on the next pass)');
    rmSync(join(root, 'etc/app.ini'), { recursive: true });
    expect(await pass(root, decl)).toEqual([
      { id: 'file:/etc/other.ini', result: 'unchanged' },
      { id: 'file:/etc/app.ini', result: 'created', changes: ['absent, should be a file'] },
      { id: 'command:reload', result: 'updated', changes: ['ran: file:/etc/app.ini changed'], exit: 0 },
    ]);
    expect(pendingMarks(root)).toEqual([]);
    expect(ranLog(root)).toBe('ran\n');
  });
});

describe('command: a pass killed between the change and the command', () => {
  for (const fault of ['after-intent:1', 'after-change:1', 'before-run:1']) {
    it(`killed at ${fault}: the next pass runs the command exactly once`, async () => {
      const root = machine();
      const killed = await apply(root, watched('a'), fault);
      expect(killed.body, killed.stderr).toBeNull();
      expect(ranLog(root)).toBe('');
      expect(pendingMarks(root)).toEqual(['command:reload']);
      const next = await pass(root, watched('a'));
      expect(command('command:reload', next)).toMatchObject({ result: 'updated', exit: 0 });
      expect(await pass(root, watched('a'))).toEqual([{ id: 'file:/etc/app.ini', result: 'unchanged' }, { id: 'command:reload', result: 'unchanged' }]);
      expect(ranLog(root)).toBe('ran\n');
    });
  }
});

/** The commands pending in the store: its snapshot's list, then its journal's marks (a killed pass has not folded them in). */
function pendingMarks(root: string): string[] {
  const path = join(root, 'var/lib/mesh-host/store.json');
  const marks = new Set(existsSync(path) ? (store(root).pending ?? []) : []);
  const journal = existsSync(`${path}.journal`) ? readFileSync(`${path}.journal`, 'utf8').split('\n').filter(Boolean) : [];
  for (const line of journal) {
    const entry = JSON.parse(line) as { pending?: string; cleared?: string };
    if (entry.pending) marks.add(entry.pending);
    if (entry.cleared) marks.delete(entry.cleared);
  }
  return [...marks];
}

describe('command: owns nothing', () => {
  it('is never in the owned set, and removing it from the declaration runs nothing and drops its pending trigger', async () => {
    const root = machine();
    await apply(root, watched('a'), 'before-run:1');
    expect(pendingMarks(root)).toEqual(['command:reload']);
    const fileOnly = `  - type: file\n    path: /etc/app.ini\n    content: "a\\n"\n`;
    expect(await pass(root, fileOnly)).toEqual([{ id: 'file:/etc/app.ini', result: 'unchanged' }]);
    const state = JSON.parse((await runProgram('node', [MESH_HOST, 'state', '--json', '--root', root], root)).stdout) as { owned: Array<{ id: string }> };
    expect(state.owned.map((o) => o.id)).toEqual(['file:/etc/app.ini']);
    expect(store(root).pending).toBeUndefined();
    expect(await pass(root, watched('a'))).toEqual([{ id: 'file:/etc/app.ini', result: 'unchanged' }, { id: 'command:reload', result: 'unchanged' }]);
    expect(await pass(root, '')).toEqual([{ id: 'file:/etc/app.ini', result: 'removed' }]);
    expect(ranLog(root)).toBe('');
  });
});

describe('command: beside a service restartOn', () => {
  it('a changed file restarts the service and runs the command in the same pass', async () => {
    const root = machine();
    mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
    writeFileSync(join(root, 'etc/systemd/system/demo.service'), '[Unit]\nDescription=demo\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n');
    const decl = (content: string) => watched(content) + '  - type: service\n    name: demo\n    enabled: true\n    restartOn: [/etc/app.ini]\n';
    await pass(root, decl('a'));
    expect(await pass(root, decl('b'))).toEqual([
      { id: 'file:/etc/app.ini', result: 'updated', changes: ['content differs'] },
      { id: 'command:reload', result: 'updated', changes: ['ran: file:/etc/app.ini changed'], exit: 0 },
      { id: 'service:demo', result: 'unverified', changes: ['restart requested: /etc/app.ini changed'], error: 'restart requested but no running systemd' },
    ]);
    expect(ranLog(root)).toBe('ran\nran\n');
  });
});

describe('command: bad input', () => {
  function fleet(files: Record<string, string>): string {
    const repo = tempDir('mesh-cmd-fleet-');
    for (const [path, text] of Object.entries({ 'mesh.yaml': 'name: t\ntrust: none\n', 'nodes/web-1/node.yaml': 'node: web-1\ngeneration: 1\n', ...files })) {
      mkdirSync(dirname(join(repo, path)), { recursive: true });
      writeFileSync(join(repo, path), text);
    }
    return repo;
  }
  const reload = (extra: string) => `  - type: command\n    name: reload\n    run: [systemctl, reload, app]\n${extra}`;
  const file = '  - type: file\n    path: /etc/app.ini\n    content: "x\\n"\n';

  it('validate names the place of an onChange naming an unknown resource or one declared after the command, of a string run without shell, of shell with an argv, and of a timeout that is no duration', async () => {
    const repo = fleet({
      'nodes/web-1/a.yaml': `resources:\n${reload('    onChange: ["file:/etc/app.ini", "file:/etc/nope.ini"]\n')}${file}`,
      'nodes/web-1/b.yaml': `resources:\n  - type: command\n    name: migrate\n    run: "rake db:migrate"\n`,
      'nodes/web-1/c.yaml': `resources:\n  - type: command\n    name: seed\n    run: [rake, db:seed]\n    shell: true\n    timeout: soon\n`,
    });
    await git(repo, 'init', '-q');
    const r = await cli(repo, 'validate', '--no-fetch');
    expect(r.code).toBe(1);
    expect(r.stdout.split('\n')).toEqual([
      "nodes/web-1/a.yaml:5:16: onChange names file:/etc/app.ini, which is declared after this command (at nodes/web-1/a.yaml:6:5): a command may watch only resources declared before it; move the command below it",
      "nodes/web-1/a.yaml:5:37: onChange names file:/etc/nope.ini, which this node's declaration does not declare: name a resource declared before this command by its id, such as file:/etc/app/app.ini",
      'nodes/web-1/b.yaml:4:10: resources.0.run: run is a single string, which only a shell can split: write it as an argv list such as [systemctl, reload, app], or set shell: true to run it with /bin/sh -c',
      'nodes/web-1/c.yaml:5:12: resources.0.shell: shell: true runs one line with /bin/sh -c: write run (and unless, onlyif) as one string, or drop shell: true and keep the argv list',
      'nodes/web-1/c.yaml:6:14: resources.0.timeout: must be a duration such as 30s, 5m or 1h',
      '',
    ]);
    expect(r.stderr).toBe('5 problems in 3 files (1 node, 0 roles checked)\n');
  });

  it('a host given a declaration whose onChange is out of order applies nothing and reports the place', async () => {
    const root = machine();
    const { code, body } = await apply(root, `${reload('    onChange: ["file:/etc/app.ini"]\n')}${file}`);
    expect(code).toBe(1);
    expect(body!.outcome).toBe('failed');
    expect(body!.resources).toEqual([]);
    const base = join(root, '..', 'bundle', 'base.yaml');
    expect(body!.errors).toEqual([
      { code: 'E_INVALID', file: base, line: 5, col: 16, message: `onChange names file:/etc/app.ini, which is declared after this command (at ${base}:6:5): a command may watch only resources declared before it; move the command below it` },
    ]);
    expect(existsSync(join(root, 'etc/app.ini'))).toBe(false);
  });
});

describe('command: the output tail', () => {
  it('keeps the last 20 lines and at most 2 KB', () => {
    const many = Array.from({ length: 50 }, (_, i) => `line ${i}`).join('\n') + '\n';
    expect(tail(many).split('\n')).toEqual(Array.from({ length: 20 }, (_, i) => `line ${i + 30}`));
    const wide = Array.from({ length: 5 }, (_, i) => `${i}${'x'.repeat(999)}`).join('\n');
    expect(Buffer.byteLength(tail(wide))).toBeLessThanOrEqual(2048);
    expect(tail(wide).endsWith(`4${'x'.repeat(999)}`)).toBe(true);
  });
});

describe('command: the pending marks in the store', () => {
  it('survive a reopen (journal and snapshot), are validated when the snapshot was edited, and a store from before commands reads as none pending', () => {
    const path = join(tempDir('mesh-cmd-store-'), 'store.json');
    const store = openStore(path);
    store.intend([], ['command:a', 'command:b']);
    expect(openStore(path).pendingIds()).toEqual(['command:a', 'command:b']);
    store.clearPending('command:a');
    store.save();
    expect(JSON.parse(readFileSync(path, 'utf8')).pending).toEqual(['command:b']);
    writeFileSync(path, JSON.stringify({ ...emptyStore(), pending: ['command:c'] })); // edited: its sum no longer matches, so it is validated
    expect(openStore(path).pendingIds()).toEqual(['command:c']);
    writeFileSync(path, JSON.stringify({ ...emptyStore(), pending: 'command:c' }));
    expect(() => openStore(path)).toThrow(/cannot be read/);
    writeFileSync(path, JSON.stringify(emptyStore())); // as hosts without commands wrote it
    const old = openStore(path);
    expect(old.pendingIds()).toEqual([]);
    expect(old.isPending('command:c')).toBe(false);
  });
});
