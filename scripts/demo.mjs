#!/usr/bin/env node
// The mesh demo: an embedded fleet on 127.0.0.1 with three simulated machines, each a folder
// standing for a machine's root. It narrates each step, runs the built commands exactly as
// a user would, and removes everything it made on exit (Ctrl-C included).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const cliBin = join(top, 'dist/mesh-cli.mjs');
const hostBin = join(top, 'dist/mesh-host.mjs');
const work = mkdtempSync(join(tmpdir(), 'mesh-demo-'));
const nodes = ['web-1', 'web-2', 'db-1'];
let server;

const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s) => console.log(`\n${bold('==> ' + s)}`);
const show = (cmd, args, cwd) => {
  console.log(`$ ${cmd} ${args.join(' ')}`);
  const out = execFileSync(cmd === 'mesh-cli' ? 'node' : cmd === 'mesh-host' ? 'node' : cmd, cmd.startsWith('mesh-') ? [cmd === 'mesh-cli' ? cliBin : hostBin, ...args] : args, {
    cwd,
    env: { ...process.env, MESH_LOG_LEVEL: 'warn', GIT_AUTHOR_NAME: 'demo', GIT_AUTHOR_EMAIL: 'demo@localhost', GIT_COMMITTER_NAME: 'demo', GIT_COMMITTER_EMAIL: 'demo@localhost' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  process.stdout.write(out.replace(/^/gm, '    ').replace(/ {4}$/, ''));
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
  server = spawn('node', [cliBin, 'serve', '--data', data, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  // At its first start the server makes an operator credential and shows it once, on stderr.
  const secret = new Promise((resolve) => createInterface({ input: server.stderr }).on('line', (l) => {
    const m = /operator credential: operator:(\S+)$/.exec(l);
    if (m) resolve(m[1]);
  }));
  const first = await new Promise((resolve) => createInterface({ input: server.stdout }).once('line', resolve));
  console.log(`    ${first}`);
  const url = first.replace('listening on ', '').replace('://', `://operator:${await secret}@`) + 'fleet.git';
  console.log('    (operator credential made at first start: DATA/operators keeps only its sha256)');

  say('Creating the fleet repo from examples/fleet-repo, signed with a new operator key, and pushing it');
  const fleet = join(work, 'fleet');
  const key = join(work, 'operator_ed25519'); // the demo's own key: it never touches ~/.ssh
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'demo operator', '-f', key]);
  show('mesh-cli', ['init', fleet, '--signing-key', key, '--signer', 'demo@localhost'], work);
  console.log(`$ git remote add origin ${url.replace(/:[^:@/]+@/, ':***@')}`);
  execFileSync('git', ['remote', 'add', 'origin', url], { cwd: fleet });
  show('git', ['push', '--quiet', '-u', 'origin', 'main'], fleet);

  say('Issuing a one-time token per machine (each bumps the node generation in nodes/<node>/node.yaml), then pushing');
  for (const node of nodes) show('mesh-cli', ['token', 'issue', node, '--out', join(work, `${node}.token`)], fleet);
  show('git', ['push', '--quiet'], fleet);

  say('Enrolling three simulated machines (each is a --root folder); each pushes a signed enrolment report');
  for (const node of nodes) {
    const root = join(work, 'machines', node);
    for (const d of ['etc', 'srv', 'var/lib/dpkg']) mkdirSync(join(root, d), { recursive: true });
    writeFileSync(join(root, 'var/lib/dpkg/status'), ''); // an (empty) package database: a machine with a package manager
    show('mesh-host', ['enrol', '--token-file', join(work, `${node}.token`), '--root', root], work);
  }

  say('Declaring a base for every node: git commit && git push is the deploy');
  for (const node of nodes) {
    mkdirSync(join(fleet, 'nodes', node), { recursive: true });
    writeFileSync(join(fleet, 'nodes', node, 'base.yaml'), `resources:\n  - type: directory\n    path: /srv/app\n  - type: file\n    path: /etc/motd\n    content: "${node}: managed by mesh\\n"\n    mode: "0644"\n`);
  }
  show('git', ['add', '-A'], fleet);
  show('git', ['commit', '--quiet', '-m', 'base for every node'], fleet);
  show('git', ['push', '--quiet'], fleet);
  say('mesh-cli status before the machines have run: their last reports are the enrolment reports');
  show('mesh-cli', ['status'], fleet);
  for (const node of nodes) show('mesh-host', ['run', '--once', '--root', join(work, 'machines', node)], work);
  say('mesh-cli status: every node applied the commit, and every report signature verifies');
  show('mesh-cli', ['status'], fleet);

  say('Changing two nodes: web-1 and web-2 get an app config; db-1 is untouched');
  for (const node of ['web-1', 'web-2']) writeFileSync(join(fleet, 'nodes', node, 'app.yaml'), 'resources:\n  - type: file\n    path: /srv/app/app.ini\n    content: "port=8080\\n"\n    mode: "0640"\n');
  show('git', ['add', '-A'], fleet);
  show('git', ['commit', '--quiet', '-m', 'web: app config'], fleet);
  show('git', ['push', '--quiet'], fleet);
  for (const node of nodes) show('mesh-host', ['run', '--once', '--root', join(work, 'machines', node)], work);
  say('mesh-cli status after the change');
  show('mesh-cli', ['status'], fleet);
  say('What web-1 now has under its root, and what it owns');
  console.log(`    /srv/app/app.ini: ${readFileSync(join(work, 'machines/web-1/srv/app/app.ini'), 'utf8').trim()}`);
  show('mesh-host', ['state', '--root', join(work, 'machines/web-1')], work);
  say('Done: stopping the server and removing the demo folder');
}

main()
  .catch((e) => {
    console.error(`demo failed: ${e.message}`);
    process.exitCode = 1;
  })
  .finally(cleanup);
