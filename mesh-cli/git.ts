/**
 * Every git process mesh-cli runs starts here: short commands whose output is read whole
 * (`git`, `gitOk`), and long-running ones whose streams the caller drives (`spawnGit`: the
 * streaming `cat-file --batch`, `http-backend` under `mesh-cli serve`). The environment is
 * passed through as it is (GIT_* included): the operator's git configuration is theirs.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { MeshError } from '../core/errors.js';

/** What git says when it cannot reach a remote at all (HTTP, DNS, ssh) or the remote is busy (HTTP 429, 502–504): a passing fault, tried again later; any other failure is a person's to fix. */
const UNREACHABLE = /Failed to connect to|Couldn't connect to server|Could not resolve host|Connection refused|Connection timed out|Connection reset|Operation timed out|returned error: (?:429|50[234])/;

/** Run `git args…` in `dir` with `input` on its stdin (and `env` added to the environment) and return its stdout as bytes; a MeshError with git's stderr when it exits non-zero. */
export function gitBytes(dir: string, args: string[], input: string | Buffer = '', env?: NodeJS.ProcessEnv): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawnGit(dir, args, env);
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

/** The line of git's stderr that says what went wrong: its first `fatal:` or `error:` line (without that word), else its last line. */
export function gitSaid(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  return (lines.find((l) => /^(fatal|error): /.test(l)) ?? lines.at(-1) ?? '').replace(/^(fatal|error): /, '');
}

/** Run `git args…` in `dir` and return its stdout as text. */
export async function git(dir: string, args: string[], input: string | Buffer = '', env?: NodeJS.ProcessEnv): Promise<string> {
  return (await gitBytes(dir, args, input, env)).toString('utf8');
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

/**
 * An object read by `git cat-file --batch`: its id, type, size and content; a blob over the
 * reader's `maxBlob` has no content (`oversized`): it was never held in memory.
 */
export interface BatchObject {
  oid: string;
  type: string;
  size: number;
  data: Buffer;
  oversized?: true;
}

/** A running `git cat-file --batch`: each `read` writes its specs and resolves with their objects in order (null: missing). */
export interface CatFileBatch {
  read(specs: string[]): Promise<Array<BatchObject | null>>;
  close(): Promise<void>;
}

/**
 * One `git cat-file` for many reads (`args` go before `cat-file`, e.g. `--git-dir=…`): its answers
 * are parsed as they stream in, each read's objects handed back once all are in. Objects written
 * to the store after it started are found (git looks again for new packs). A blob larger than
 * `maxBlob` bytes is passed over as it streams by, never kept whole.
 *
 * It runs `--batch-command --buffer` (git 2.36 and later): each read is a `contents` command per
 * object and one `flush`, so git writes its answers in large blocks, where `--batch` writes every
 * object on its own and this process takes a pipe read for each. Reading 40,000 report objects,
 * that took ~0.4 s less CPU in all (docs/scale.md, session 17). An older git, which refuses the
 * option, gets `--batch`, and the reads waiting are asked again there.
 */
export function catFileBatch(dir: string, args: string[] = [], { maxBlob = Infinity }: { maxBlob?: number } = {}): CatFileBatch {
  const queue: Array<{ specs: string[]; left: number; out: Array<BatchObject | null>; resolve: (o: Array<BatchObject | null>) => void; reject: (e: Error) => void }> = [];
  let failed: Error | null = null;
  let answered = false;
  const fail = (e: Error) => {
    failed ??= e;
    for (const r of queue.splice(0)) r.reject(failed);
  };
  const take = (o: BatchObject | null) => {
    answered = true;
    const head = queue[0]!;
    head.out.push(o);
    if (--head.left === 0) head.resolve(queue.shift()!.out);
  };
  let ask: (specs: string[]) => void;
  let closed: Promise<void>;
  let end: () => void;
  let ending = false;
  const start = (commands: boolean) => {
    const child = spawnGit(dir, [...args, 'cat-file', ...(commands ? ['--batch-command', '--buffer'] : ['--batch'])]);
    const err: Buffer[] = [];
    let buf: Buffer = Buffer.alloc(0);
    /** Bytes of an oversized blob (and its newline) still to pass over. */
    let skip = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      if (skip >= chunk.length) {
        skip -= chunk.length;
        return;
      }
      chunk = chunk.subarray(skip);
      skip = 0;
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      let at = 0;
      while (queue.length > 0) {
        const eol = buf.indexOf(10, at);
        if (eol < 0) break;
        const header = buf.toString('latin1', at, eol);
        const [oid, type, size] = header.split(' ');
        if (size === undefined) { // "<spec> missing" or "<spec> ambiguous"
          at = eol + 1;
          take(null);
          continue;
        }
        const end = eol + 1 + Number(size);
        if (type === 'blob' && Number(size) > maxBlob) {
          take({ oid: oid!, type, size: Number(size), data: Buffer.alloc(0), oversized: true });
          skip = Math.max(0, end + 1 - buf.length);
          at = Math.min(end + 1, buf.length);
          if (skip > 0) break;
          continue;
        }
        if (end + 1 > buf.length) break;
        take({ oid: oid!, type: type!, size: Number(size), data: buf.subarray(eol + 1, end) });
        at = end + 1;
      }
      buf = buf.subarray(at);
    });
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.stdin.on('error', () => undefined); // its exit says why
    child.on('error', (e) => fail(new MeshError('E_GIT', `cannot run git: ${e.message}: install git`)));
    closed = new Promise<void>((resolve) => child.on('close', (code) => {
      const said = Buffer.concat(err).toString('utf8').trim();
      if (commands && code === 129 && !answered && /batch-command/.test(said)) {
        // A git older than 2.36: the same reads through --batch.
        start(false);
        for (const r of queue) ask(r.specs);
        return resolve(closed);
      }
      if (code !== 0 || queue.length > 0) fail(new MeshError('E_GIT', `git cat-file failed in ${dir}: ${said || `exit ${code}`}`));
      resolve();
    }));
    ask = commands
      ? (specs) => child.stdin.write(specs.map((s) => `contents ${s}\n`).join('') + 'flush\n')
      : (specs) => child.stdin.write(specs.join('\n') + '\n');
    end = () => child.stdin.end();
    if (ending) end();
  };
  start(true);
  return {
    read(specs) {
      if (failed) return Promise.reject(failed);
      if (specs.length === 0) return Promise.resolve([]);
      return new Promise((resolve, reject) => {
        queue.push({ specs, left: specs.length, out: [], resolve, reject });
        ask(specs);
      });
    },
    close() {
      ending = true;
      end();
      return closed;
    },
  };
}
