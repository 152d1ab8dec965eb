#!/usr/bin/env node
// The mesh demo: an embedded fleet on 127.0.0.1 with three simulated machines, each a folder
// standing for a machine's root, deploying the example fleet (examples/fleet-repo). It narrates each step, runs the built commands exactly as
// a user would, and removes everything it made on exit (Ctrl-C included). With --real, one real
// Debian machine with systemd joins the fleet and upgrades its own mesh-host (scripts/demo-real.mjs).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const cliBin = join(top, 'dist/mesh-cli.mjs');
const hostBin = join(top, 'dist/mesh-host.cjs');
const work = mkdtempSync(join(tmpdir(), 'mesh-demo-'));
const nodes = [['web-1', 'web'], ['web-2', 'web'], ['db-1', 'db']];
const real = process.argv.slice(2).includes('--real');
const machine = (node) => join(work, 'machines', node);
let server;

const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s) => console.log(`\n${bold('==> ' + s)}`);
/** Run a command as a user would and print it and its output; `codes`: the exit codes that are an answer, not a failure. */
const show = (cmd, args, cwd, codes = [0]) => {
  console.log(`$ ${cmd} ${args.join(' ')}`);
  let out;
  let code = 0;
  try {
    out = execFileSync(cmd === 'mesh-cli' ? 'node' : cmd === 'mesh-host' ? 'node' : cmd, cmd.startsWith('mesh-') ? [cmd === 'mesh-cli' ? cliBin : hostBin, ...args] : args, {
      cwd,
      env: { ...process.env, MESH_LOG_LEVEL: 'warn', GIT_AUTHOR_NAME: 'demo', GIT_AUTHOR_EMAIL: 'demo@localhost', GIT_COMMITTER_NAME: 'demo', GIT_COMMITTER_EMAIL: 'demo@localhost' },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  } catch (e) {
    if (typeof e.status !== 'number' || !codes.includes(e.status)) throw e;
    [out, code] = [e.stdout, e.status];
  }
  process.stdout.write(out.replace(/^/gm, '    ').replace(/ {4}$/, ''));
  if (code !== 0) console.log(`    (exit ${code})`);
  return out;
};

function cleanup() {
  server?.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});

async function main() {
  say(`Starting the embedded git server (mesh-cli serve) on 127.0.0.1; everything lives in ${work}`);
  const data = join(work, 'data');
  mkdirSync(data);
  execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', join(data, 'fleet.git')]);
  // With --real, the server also serves a package repository: the real machine upgrades mesh-host from it.
  const packages = join(work, 'packages');
  if (real) mkdirSync(packages);
  server = spawn('node', [cliBin, 'serve', '--data', data, '--port', '0', ...(real ? ['--packages', packages] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  // At its first start the server makes an operator credential and shows it once, on stderr.
  const secret = new Promise((resolve) => createInterface({ input: server.stderr }).on('line', (l) => {
    const m = /operator credential: operator:(\S+)$/.exec(l);
    if (m) resolve(m[1]);
  }));
  const first = await new Promise((resolve) => createInterface({ input: server.stdout }).once('line', resolve));
  console.log(`    ${first}`);
  const url = first.replace('listening on ', '').replace('://', `://operator:${await secret}@`) + 'fleet.git';
  console.log('    (operator credential made at first start: DATA/operators keeps only its sha256)');

  say('Creating the fleet repo with the example fleet (groups web and db, two roles, variables), signed with a new operator key');
  const fleet = join(work, 'fleet');
  const key = join(work, 'operator_ed25519'); // the demo's own key: it never touches ~/.ssh
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'demo operator', '-f', key]);
  show('mesh-cli', ['init', fleet, '--example', '--signing-key', key, '--signer', 'demo@localhost'], work);
  show('find', ['nodes', 'roles', '-name', '*.yaml'], fleet);
  console.log(`$ git remote add origin ${url.replace(/:[^:@/]+@/, ':***@')}`);
  execFileSync('git', ['remote', 'add', 'origin', url], { cwd: fleet });
  show('git', ['push', '--quiet', '-u', 'origin', 'main'], fleet);

  say('Issuing a one-time token per machine, each in its group (nodes/<group>/<node>/node.yaml), then pushing');
  for (const [node, group] of nodes) show('mesh-cli', ['token', 'issue', node, '--group', group, '--out', join(work, `${node}.token`)], fleet);
  show('git', ['push', '--quiet'], fleet);
  show('mesh-cli', ['validate'], fleet);

  say('Enrolling three simulated machines (each is a --root folder); each pushes a signed enrolment report');
  for (const [node] of nodes) {
    const root = machine(node);
    for (const d of ['etc', 'srv', 'var/log', 'var/lib/dpkg']) mkdirSync(join(root, d), { recursive: true });
    writeFileSync(join(root, 'var/lib/dpkg/status'), ''); // an (empty) package database: a machine with a package manager
    writeFileSync(join(root, 'etc/hostname'), `${node}.lab\n`); // facts of a simulated machine: its hostname and its OS
    writeFileSync(join(root, 'etc/os-release'), 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n');
    show('mesh-host', ['enrol', '--token-file', join(work, `${node}.token`), '--root', root], work);
  }

  say('Each machine runs once: it renders its part of the fleet with its own facts, applies it and reads it back');
  for (const [node] of nodes) show('mesh-host', ['run', '--once', '--root', machine(node)], work);
  show('mesh-cli', ['status'], fleet);
  say('What the templates made: the same files, each machine its own values');
  for (const [node, file] of [['web-1', 'etc/app/app.ini'], ['web-2', 'etc/app/app.ini'], ['web-2', 'etc/vhosts/admin.web-2.example.org.conf'], ['db-1', 'etc/db/db.conf'], ['db-1', 'etc/motd']]) {
    console.log(`    ${node}:/${file}`);
    console.log(readFileSync(join(machine(node), file), 'utf8').trimEnd().replace(/^/gm, '      '));
  }

  say("Changing one value for one node: web-2's own port. The plan names exactly the nodes it touches");
  show('mesh-cli', ['set', 'nodes/web/web-2/vars.yaml', 'port=9191', '--plan'], fleet);
  show('git', ['add', '-A'], fleet);
  show('git', ['commit', '--quiet', '-m', 'web-2: port 9191'], fleet);
  show('git', ['push', '--quiet'], fleet);
  show('mesh-cli', ['vars', 'web-2', '--explain'], fleet);
  for (const [node] of nodes) show('mesh-host', ['run', '--once', '--root', machine(node)], work);
  say("reload-app (a command with onChange) ran when each web node's app.ini was first written, again on web-2 after its change, and on no unchanged pass");
  for (const [node] of nodes.filter(([, group]) => group === 'web')) {
    console.log(`    ${node}:/var/log/app/reloads.log: ${readFileSync(join(machine(node), 'var/log/app/reloads.log'), 'utf8').trim().split('\n').length} reload(s)`);
  }
  say('Is it out? status --commit says which nodes the commit affected and which applied it');
  show('mesh-cli', ['status', '--commit', 'HEAD'], fleet);
  console.log(`    web-2:/etc/app/app.ini: ${readFileSync(join(machine('web-2'), 'etc/app/app.ini'), 'utf8').split('\n')[1]}`);
  show('mesh-host', ['state', '--root', machine('web-2')], work);
  if (real) {
    const { realMachine } = await import('./demo-real.mjs');
    // status exits 1 while a node's last pass failed: read its JSON whatever the exit code.
    const status = () => JSON.parse(spawnSync('node', [cliBin, 'status', '--json'], { cwd: fleet, encoding: 'utf8', env: { ...process.env, MESH_LOG_LEVEL: 'warn' } }).stdout || '{"nodes":[]}');
    await realMachine({ top, work, fleet, packages, url: first.replace('listening on ', ''), say, show, status });
  }
  say('Done: stopping the server and removing the demo folder');
}

main()
  .catch((e) => {
    console.error(`demo failed: ${e.message}`);
    process.exitCode = 1;
  })
  .finally(cleanup);
