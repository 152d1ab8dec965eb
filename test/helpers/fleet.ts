/**
 * A real fleet for end-to-end tests: the built mesh-cli serving a bare repository through
 * the real `git http-backend` on 127.0.0.1, an operator checkout driven by the real git
 * binary, and simulated machines, each a temporary --root folder running the built mesh-host.
 * The fleet is a signed one, as `mesh-cli init` makes it: the checkout signs every commit with
 * a key made for the test (never the real ~/.ssh), and talks to the server as its operator.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const TOP = join(dirname(fileURLToPath(import.meta.url)), '../..');
/** The built bundles under test: dist/ (what `npm test` builds), or MESH_DIST for a private build. */
export const DIST = process.env.MESH_DIST ?? join(TOP, 'dist');
export const MESH_CLI = join(DIST, 'mesh-cli.mjs');
export const MESH_HOST = join(DIST, 'mesh-host.cjs');

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a program to completion; never throws on a non-zero exit. */
export function runProgram(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...process.env, MESH_LOG_LEVEL: 'warn', ...env }, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

export const cli = (cwd: string, ...args: string[]) => runProgram('node', [MESH_CLI, ...args], cwd);
export const hostCmd = (root: string, ...args: string[]) => runProgram('node', [MESH_HOST, ...args, '--root', root], root);
export const gitIn = (cwd: string, ...args: string[]) => runProgram('git', args, cwd);

/** Run git and fail loudly when it fails. */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  const r = await gitIn(cwd, ...args);
  if (r.code !== 0) throw new Error(`git ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout.trim();
}

/** A simulated machine: a folder with the top-level directories every Debian machine has. */
export function newMachine(root: string): string {
  for (const d of ['etc', 'srv', 'opt', 'var/lib', 'usr/bin', 'home', 'tmp']) mkdirSync(join(root, d), { recursive: true });
  return root;
}

export interface Server {
  url: string;
  proc: ChildProcess;
  data: string;
  /** The operator credential's secret, when this start created DATA/operators. */
  operator?: string;
  /** Everything the server wrote to stderr so far (its request log). */
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Start `mesh-cli serve --port 0` on `data` and wait for its first line. It authenticates when
 * `auth` is set or `data` already has an operators file (a restart of an authenticated server);
 * otherwise it runs `--open`.
 */
export async function startServer(data: string, port = 0, opts: { auth?: boolean } = {}): Promise<Server> {
  const auth = opts.auth ?? existsSync(join(data, 'operators'));
  const created = auth && !existsSync(join(data, 'operators'));
  const proc = spawn('node', [MESH_CLI, 'serve', '--data', data, '--port', String(port), ...(auth ? [] : ['--open'])], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<never>((_, reject) => proc.once('exit', (code) => reject(new Error(`mesh-cli serve exited with ${code}`))));
  exited.catch(() => {});
  const log: string[] = [];
  const operator = firstMatch(createInterface({ input: proc.stderr! }), log, /operator credential: operator:(\S+)$/);
  const first = await Promise.race([new Promise<string>((resolve) => createInterface({ input: proc.stdout! }).once('line', resolve)), exited]);
  const secret = created ? await Promise.race([operator, exited]) : undefined;
  const url = first.replace(/^listening on /, '');
  const stop = (signal: NodeJS.Signals = 'SIGTERM') =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill(signal);
    });
  return { url, proc, data, ...(secret ? { operator: secret } : {}), stderr: () => log.join('\n'), stop };
}

/** The first capture of `re` in `lines`, which are all kept in `log` (read to the end, so the pipe never fills). */
function firstMatch(lines: ReturnType<typeof createInterface>, log: string[], re: RegExp): Promise<string> {
  return new Promise((resolve) => lines.on('line', (l) => {
    log.push(l);
    const m = re.exec(l);
    if (m) resolve(m[1]!);
  }));
}

/** The URL of repository `name` on `server` with the operator's credential in it, as a fleet checkout's origin has it. */
export function operatorUrl(server: Server, secret: string, name = 'fleet.git'): string {
  return `${server.url.replace('://', `://operator:${secret}@`)}${name}`;
}

/** A new ed25519 key pair for signing commits in a test (`file` and `file.pub`); returns the private key file. */
export function signingKey(file: string, comment = 'test operator'): string {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file]);
  return file;
}

export interface TestFleet {
  dir: string;
  checkout: string;
  server: Server;
  /** The fleet repo's URL with the operator credential in it (the checkout's origin). */
  repoUrl: string;
  /** The same URL without a credential (what a token carries). */
  plainUrl: string;
  /** The operator credential's secret. */
  operator: string;
  /** The private key that signs the checkout's commits (trusted in mesh.yaml). */
  signingKey: string;
  /** Issue a token for `node` (in group folder `group` under nodes/, when given), push it, and enrol a new simulated machine (with a dpkg database: eligible); returns its root. */
  enrol(node: string, group?: string): Promise<string>;
  /** Write files in the checkout, commit and push; returns the new commit. */
  commit(files: Record<string, string | null>, message: string): Promise<string>;
  close(): Promise<void>;
}

/** A served fleet repo with an operator checkout, all under one temporary folder. */
export async function createFleet(): Promise<TestFleet> {
  const dir = mkdtempSync(join(tmpdir(), 'mesh-test-'));
  const data = join(dir, 'data');
  mkdirSync(data);
  await git(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
  const server = await startServer(data, 0, { auth: true });
  const operator = server.operator!;
  const repoUrl = operatorUrl(server, operator);
  const key = signingKey(join(dir, 'operator_ed25519'));
  const checkout = join(dir, 'fleet');
  try {
    const init = await cli(dir, 'init', checkout, '--signing-key', key, '--signer', 'test@localhost');
    if (init.code !== 0) throw new Error(init.stderr);
    await git(checkout, 'config', 'user.name', 'test');
    await git(checkout, 'config', 'user.email', 'test@localhost');
    await git(checkout, 'remote', 'add', 'origin', repoUrl);
    await git(checkout, 'push', '--quiet', '-u', 'origin', 'main');
  } catch (e) {
    await server.stop(); // a fleet that could not be set up leaves no server behind
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const fleet: TestFleet = {
    dir,
    checkout,
    server,
    repoUrl,
    plainUrl: `${server.url}fleet.git`,
    operator,
    signingKey: key,
    async enrol(node, group) {
      const tokenFile = join(dir, `${node}.token`);
      const issued = await cli(checkout, 'token', 'issue', node, '--out', tokenFile, ...(group ? ['--group', group] : []));
      if (issued.code !== 0) throw new Error(issued.stderr);
      await git(checkout, 'push', '--quiet');
      const root = newMachine(join(dir, 'machines', node));
      // A dpkg database, so that the briefing's "package manager present" passes and the node is eligible.
      mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
      writeFileSync(join(root, 'var/lib/dpkg/status'), '', { flag: 'a' });
      const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
      if (enrolled.code !== 0) throw new Error(enrolled.stderr);
      return root;
    },
    async commit(files, message) {
      for (const [path, text] of Object.entries(files)) {
        const full = join(checkout, path);
        if (text === null) rmSync(full);
        else {
          mkdirSync(dirname(full), { recursive: true });
          writeFileSync(full, text);
        }
      }
      await git(checkout, 'add', '-A');
      await git(checkout, '-c', 'user.name=test', '-c', 'user.email=test@localhost', 'commit', '--quiet', '-m', message);
      await git(checkout, 'push', '--quiet');
      return git(checkout, 'rev-parse', 'HEAD');
    },
    async close() {
      await fleet.server.stop(); // the server a test restarted, not only the first one
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return fleet;
}
