// The `run --once` side of `npm run bench`: a real fleet on 127.0.0.1 (the built `mesh-cli
// serve`, a signed fleet repo made by `mesh-cli init`, nodes enrolled with `mesh-cli token
// issue` and `mesh-host enrol`), and each workload declared for a node of its own. A pass is
// `node dist/mesh-host.cjs run --once --root R`: poll main, check its signature, load the
// declaration from the host's git objects, observe, plan, apply, report.
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from './bench-fleet-lib.mjs';
import { measure } from './bench-run.mjs';
import { declarationYaml, freshRoot, VARS } from './bench-workload.mjs';

const quiet = { MESH_LOG_LEVEL: 'warn' };

/**
 * A served fleet in `dir` for the built CLIs in `dist`. `node(name, resources)` declares
 * `resources` for a new node `name`, enrols a machine for it and returns how to run its pass.
 */
export async function benchFleet(dir, dist) {
  const cli = join(dist, 'mesh-cli.mjs');
  const host = join(dist, 'mesh-host.cjs');
  const data = join(dir, 'data');
  mkdirSync(data, { recursive: true });
  run('git', ['init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git'], data);
  const operator = randomBytes(24).toString('base64url');
  writeFileSync(join(data, 'operators'), `operator:${createHash('sha256').update(operator).digest('hex')}\n`, { mode: 0o600 });
  const server = await startServer(cli, ['serve', '--port', '0', '--data', data]);
  try {
    const checkout = join(dir, 'fleet');
    const key = join(dir, 'operator_ed25519');
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'bench operator', '-f', key], dir);
    run('node', [cli, 'init', checkout, '--signing-key', key, '--signer', 'bench@localhost'], dir);
    const git = (...args) => run('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@localhost', ...args], checkout);
    git('remote', 'add', 'origin', `${server.url.replace('://', `://operator:${operator}@`)}fleet.git`);
    git('push', '--quiet', '-u', 'origin', 'main');
    return {
      stop: server.stop,
      async node(name, resources) {
        const token = join(dir, `${name}.token`);
        run('node', [cli, 'token', 'issue', name, '--out', token], checkout);
        const nodeDir = join(checkout, 'nodes', name);
        writeFileSync(join(nodeDir, 'base.yaml'), declarationYaml(resources));
        writeFileSync(join(nodeDir, 'vars.yaml'), Object.entries(VARS).map(([k, v]) => `${k}: ${v}\n`).join(''));
        git('add', '-A');
        git('commit', '--quiet', '-m', `${name}: ${resources.length} resources`);
        git('push', '--quiet');
        const root = join(dir, `${name}-root`);
        freshRoot(root);
        // A dpkg database, so that the briefing's "package manager present" passes and the node is eligible.
        mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
        writeFileSync(join(root, 'var/lib/dpkg/status'), '');
        run('node', [host, 'enrol', '--token-file', token, '--root', root], dir, quiet);
        const pass = () => measure('node', [host, 'run', '--once', '--root', root], quiet);
        const first = await pass();
        if (first.code !== 0) throw new Error(`${name}: the first pass failed (exit ${first.code}):\n${first.stdout}${first.stderr}`);
        return { name: 'mesh run --once', root, run: pass, coldCache: () => rmSync(join(root, 'var/lib/mesh-host/declaration-cache.json'), { force: true }) };
      },
    };
  } catch (e) {
    await server.stop();
    throw e;
  }
}

function run(cmd, args, cwd, env = {}) {
  return execFileSync(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}
