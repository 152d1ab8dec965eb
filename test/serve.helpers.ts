/** Helpers for test/serve.test.ts: temp fleet repos, the git binary, the serve process, and /proc scans. */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

/** Environment for the git binary: no user or system config, no prompts, fixed identity. */
export function gitEnv(home: string): NodeJS.ProcessEnv {
  return {
    ...process.env, HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0',
    GIT_AUTHOR_NAME: 'Op', GIT_AUTHOR_EMAIL: 'op@example.org', GIT_COMMITTER_NAME: 'Op', GIT_COMMITTER_EMAIL: 'op@example.org',
  };
}

/** Run the git binary; resolves with stdout, rejects with stderr in the message. */
export async function git(home: string, cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)('git', args, { cwd, env: gitEnv(home) });
  return stdout;
}

/** DATA with one bare repository `fleet.git` whose HEAD is refs/heads/main. */
export async function makeData(root: string): Promise<string> {
  const data = join(root, 'data');
  mkdirSync(data, { recursive: true });
  await git(root, data, 'init', '--quiet', '--bare', 'fleet.git');
  await git(root, join(data, 'fleet.git'), 'symbolic-ref', 'HEAD', 'refs/heads/main');
  return data;
}

/** A running `mesh-cli serve` child process. */
export interface Serve {
  proc: ChildProcess;
  firstLine: string;
  url: string;
  port: number;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start the bundled CLI's `serve` and wait for its first stdout line. */
export async function startServe(bundle: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Serve> {
  const proc = spawn(process.execPath, [bundle, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => { err += c.toString(); });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('close', (code, signal) => resolve({ code, signal })));
  const firstLine = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once('line', resolve);
    void exited.then(({ code }) => reject(new Error(`serve exited with ${code} before listening: ${err}`)));
  });
  const port = Number(/:(\d+)\/$/.exec(firstLine)?.[1]);
  return { proc, firstLine, url: `http://127.0.0.1:${port}/`, port, stderr: () => err, exited };
}

/**
 * An environment whose PATH starts with a `git` that writes its arguments to a log and runs the
 * real git: which git commands a process ran, seen from outside it. `commands()` names each
 * command (the word after `--git-dir DIR`), in the order they ran.
 */
export function gitSpy(dir: string): { env: NodeJS.ProcessEnv; commands: () => string[] } {
  const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  const bin = join(dir, 'spy-bin');
  const log = join(dir, 'git-commands.log');
  mkdirSync(bin);
  writeFileSync(join(bin, 'git'), `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\nexec '${real}' "$@"\n`, { mode: 0o755 });
  const commands = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [])
    .map((line) => line.replace(/^--git-dir \S+ /, '').split(' ')[0]!);
  return { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, commands };
}

/** State letter and parent pid of a process from /proc/PID/stat, or null when it is gone. */
function procStat(pid: number): { state: string; ppid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]) };
  } catch {
    return null;
  }
}

function allPids(): number[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number);
}

/** Live (not zombie) processes whose parent is `ppid`. */
export function childrenOf(ppid: number): number[] {
  return allPids().filter((pid) => { const s = procStat(pid); return s !== null && s.ppid === ppid && s.state !== 'Z'; });
}

/** Whether `pid` still runs (a zombie has exited and counts as gone). */
export function isAlive(pid: number): boolean {
  const s = procStat(pid);
  return s !== null && s.state !== 'Z';
}

/** Live processes started for DATA: every CGI child and its git children inherit GIT_PROJECT_ROOT=DATA. */
export function gitProcessesServing(data: string): number[] {
  return allPids().filter((pid) => {
    try {
      return isAlive(pid) && readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`GIT_PROJECT_ROOT=${data}`);
    } catch {
      return false;
    }
  });
}

/** Poll `check` every 50 ms until it returns true or `ms` pass; returns its last answer. */
export async function waitFor(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  return check();
}

/** A slow client: announces a 1000-byte POST body, sends a few bytes of it and goes quiet. */
export function halfPost(port: number, path: string, body: Buffer, headers: Record<string, string> = {}): net.Socket {
  const service = path.split('/').pop()!;
  const head = Object.entries({ Host: 'x', 'Content-Type': `application/x-${service}-request`, 'Content-Length': '1000', ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const socket = net.connect(port, '127.0.0.1', () => socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`, () => socket.write(body)));
  socket.on('error', () => {});
  return socket;
}

/** Status and body of a GET whose path is sent exactly as given (no `..` normalisation). */
export function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    let text = '';
    socket.on('data', (c: Buffer) => { text += c.toString(); });
    socket.on('end', () => resolve({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) }));
    socket.on('error', reject);
  });
}
