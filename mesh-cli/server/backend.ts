import type { ChildProcess } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { spawnGitProgram } from '../git.js';
import { readCgiHead } from './cgi.js';
import type { CachedAnswer } from './fetch-cache.js';

/** What one CGI run of `git http-backend` needs to know about the request beyond its stream. */
export interface CgiContext {
  projectRoot: string;
  pathInfo: string;
  query: string;
  user: string;
  /** MESH_ROLE for git's hooks; absent when the server is open. */
  role?: string;
  gitConfig: Array<[string, string]>;
}

/** A running CGI child and a promise that settles once it has exited and its pipes are closed. */
export interface CgiRun {
  child: ChildProcess;
  done: Promise<void>;
}

// Variables a CGI program reads: never inherit them from whoever started the server.
const CGI_NAMES = /^(GIT_|HTTP_|MESH_ROLE$|PATH_INFO$|PATH_TRANSLATED$|QUERY_STRING$|REQUEST_METHOD$|CONTENT_|REMOTE_|SERVER_)/;

/** The environment for `git http-backend`: this process's env minus CGI/GIT_ variables, plus the request. */
export function cgiEnv(ctx: CgiContext, req: IncomingMessage): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!CGI_NAMES.test(k)) env[k] = v;
  const h = req.headers;
  Object.assign(env, {
    GIT_PROJECT_ROOT: ctx.projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: ctx.pathInfo,
    QUERY_STRING: ctx.query,
    REQUEST_METHOD: req.method ?? 'GET',
    CONTENT_TYPE: h['content-type'] ?? '',
    REMOTE_USER: ctx.user,
    REMOTE_ADDR: req.socket.remoteAddress ?? '',
  });
  if (ctx.role !== undefined) env.MESH_ROLE = ctx.role;
  // No CONTENT_LENGTH on purpose: with it, git 2.39's http-backend copies a receive-pack body in a
  // loop that spins forever at 100% CPU when stdin hits EOF early (a dead server or client). Without
  // it, git reads the body until EOF, which our pipe delivers when the request ends or we die.
  if (h['content-encoding'] !== undefined) env.HTTP_CONTENT_ENCODING = h['content-encoding'];
  const protocol = h['git-protocol'];
  if (typeof protocol === 'string' && /^[\x21-\x7e]+$/.test(protocol)) env.GIT_PROTOCOL = protocol;
  // alternateRefsPrefixes: receive-pack reads the refs of the repository it quarantines a push in
  // as "alternate refs"; limited to main, a push no longer lists every report branch (4.2 s → 0.05 s
  // of CPU at 10,000 nodes). The connectivity check sees the refs the pusher can see (--all less
  // receive.hideRefs): a node's push is checked against main and its own branch only.
  const config: Array<[string, string]> = [['http.receivepack', 'true'], ['core.alternateRefsPrefixes', 'refs/heads/main'], ...ctx.gitConfig];
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** Send `signal` to the child's whole process group (it leads one: spawned detached), so git's own children go too. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}

/**
 * Answer one request by running `program` as a CGI script; what git's hooks refused is handed to `onRefusal`. Both bodies are streamed: the request
 * is piped into the child's stdin and its stdout into the response, so no pack is held in memory.
 * stdin is always a pipe from this server, so a dead server means EOF (and EPIPE on stdout) for git.
 * With `keep`, the answer is also collected and handed to it once git has exited cleanly (null
 * when it did not, or the answer grew past `keep.limit`); `keep.settle` is called exactly once.
 */
export function runCgi(program: string, env: NodeJS.ProcessEnv, body: NodeJS.ReadableStream, res: ServerResponse,
  onFailure: (message: string) => void, onRefusal: (message: string) => void = () => {},
  keep?: { limit: number; settle: (answer: CachedAnswer | null) => void }): CgiRun {
  const child = spawnGitProgram(program, env);
  child.stdin.on('error', () => {}); // EPIPE: git stopped reading (it answers with an error itself)
  body.pipe(child.stdin);
  let stderr = '';
  let headed = false;
  let answer: CachedAnswer | null = null;
  let size = 0;
  child.stderr.on('data', (chunk: Buffer) => { if (stderr.length < 4096) stderr += chunk.toString('utf8'); });
  readCgiHead(child.stdout).then((head) => {
    if (res.destroyed) return;
    headed = true;
    res.statusCode = head.status;
    for (const [name, value] of head.headers) res.appendHeader(name, value);
    if (keep) {
      const chunks: Buffer[] = [];
      answer = { status: head.status, headers: head.headers, body: Buffer.alloc(0) };
      child.stdout.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= keep.limit) chunks.push(chunk);
      });
      child.stdout.once('end', () => { if (answer) answer.body = Buffer.concat(chunks); });
    }
    child.stdout.pipe(res, { end: false });
  }, (err: Error) => {
    onFailure(`bad CGI response: ${err.message}`);
    child.stdout.destroy();
    killGroup(child, 'SIGTERM');
  });
  // The client went away before the answer was complete: stop git rather than let it run on.
  res.on('close', () => { if (!res.writableFinished) killGroup(child, 'SIGTERM'); });
  const done = new Promise<void>((resolve) => {
    child.on('error', (err) => {
      keep?.settle(null);
      onFailure(`cannot run ${program}: ${err.message}`);
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' }).end('git http-backend could not start\n');
      resolve();
    });
    child.on('close', (code, signal) => {
      keep?.settle(code === 0 && headed && size <= keep.limit ? answer : null);
      if (code === 0 && headed) {
        res.end();
        // What the pre-receive hook refused (hooks.ts: lines "mesh: …"), for whoever runs the server.
        for (const line of stderr.split('\n')) if (line.startsWith('mesh: ')) onRefusal(line);
      } else {
        onFailure(`git http-backend exited with ${signal ?? code}: ${stderr.trim().slice(0, 500)}`);
        if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain' }).end('git http-backend failed\n');
        else res.destroy(); // a truncated answer must look broken, not complete
      }
      resolve();
    });
  });
  return { child, done };
}
