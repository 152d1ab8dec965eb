/**
 * Every git process mesh-cli runs starts here: short commands whose output is read whole
 * (`git`, `gitOk`), and long-running ones whose streams the caller drives (`spawnGit`: the
 * streaming `cat-file --batch`, `http-backend` under `mesh-cli serve`). The environment is
 * passed through as it is (GIT_* included): the operator's git configuration is theirs.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { MeshError } from '../core/errors.js';

/** What git says when it cannot reach a remote at all (HTTP, DNS, ssh): a passing fault, tried again later; any other failure is a person's to fix. */
const UNREACHABLE = /Failed to connect to|Couldn't connect to server|Could not resolve host|Connection refused|Connection timed out|Connection reset|Operation timed out|returned error: 50[234]/;

/** Run `git args…` in `dir` with `input` on its stdin and return its stdout as bytes; a MeshError with git's stderr when it exits non-zero. */
export function gitBytes(dir: string, args: string[], input: string | Buffer = ''): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawnGit(dir, args);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new MeshError('E_GIT', `cannot run git: ${e.message}: install git`)));
    child.on('close', (code, signal) => {
      if (code === 0) return resolve(Buffer.concat(out));
      const stderr = Buffer.concat(err).toString('utf8').trim();
      const next = UNREACHABLE.test(stderr) ? 'retry' : 'human';
      reject(new MeshError('E_GIT', `git ${args.slice(0, 2).join(' ')} failed in ${dir}${signal ? ` (${signal})` : ''}: ${stderr || `exit ${code}`}`, { next, data: { args, code, stderr } }));
    });
    child.stdin.on('error', () => undefined); // EPIPE: git stopped reading; its exit says why
    child.stdin.end(input);
  });
}

/** Run `git args…` in `dir` and return its stdout as text. */
export async function git(dir: string, args: string[], input: string | Buffer = ''): Promise<string> {
  return (await gitBytes(dir, args, input)).toString('utf8');
}

/** Whether `git args…` in `dir` exits 0 (for questions git answers with its exit code). */
export function gitOk(dir: string, args: string[]): Promise<boolean> {
  return gitBytes(dir, args).then(() => true, () => false);
}

/** Start `git args…` in `dir`, its three streams piped (a long-running process whose streams the caller drives). */
export function spawnGit(dir: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcessWithoutNullStreams {
  return spawn('git', args, { cwd: dir, stdio: 'pipe', ...(env ? { env: { ...process.env, ...env } } : {}) });
}

/** Start a program from git's exec path (`git-http-backend`) with exactly `env`, in its own process group, its streams piped. */
export function spawnGitProgram(program: string, env: NodeJS.ProcessEnv): ChildProcessWithoutNullStreams {
  return spawn(program, [], { env, stdio: 'pipe', detached: true });
}

/** Git's exec path (where `git-http-backend` lives). */
export async function gitExecPath(): Promise<string> {
  return (await git(process.cwd(), ['--exec-path'])).trim();
}
