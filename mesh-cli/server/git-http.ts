import { access, constants, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { MeshError, messageOf } from '../../core/errors.js';
import { allowAll, parseBasicAuth, type Authorizer } from './auth.js';
import { cgiEnv, killGroup, runCgi, type CgiRun } from './backend.js';
import { checkedDir } from './dirs.js';
import { gitSlots, type Release } from './git-slots.js';
import { MAX_ANSWER, MAX_FETCH_BODY, openFetchCache } from './fetch-cache.js';
import { answerMainPoll, MAX_POLL_BODY } from './ls-refs.js';
import { openPackCache } from './pack-cache.js';
import { nodeAdverts } from './ref-advert.js';
import type { CachedAnswer } from './fetch-cache.js';
import { route } from './route.js';
import { servePackageFile } from './static.js';
import { decidePush, RESULT } from './push-rules.js';
import { MAX_RECEIVE_BODY, reportReceiver } from './report-receive.js';
import { answerReportPack, MAX_REPORT_PACK_BODY } from './report-pack.js';
import { gitExecPath } from '../git.js';

export type { Authorizer, AuthRequest, AuthResult, Service } from './auth.js';

/** A running git server; `url` ends with `/` and carries the real port. */
export interface GitServer {
  url: string;
  port: number;
  /** Git processes running for nodes' requests, and their requests waiting for one (git-slots.ts). */
  gitLoad(): { running: number; waiting: number };
  close(): Promise<void>;
}

/** Options of startGitServer; `port: 0` picks a free port, `authorize` defaults to allow-all. */
export interface GitServerOptions {
  data: string;
  host?: string;
  port?: number;
  authorize?: Authorizer;
  packages?: string;
  /** Each request and event; `level` (default info) is `error` for what failed on the server's side, `warn` for what it refused or put off. */
  log?: (msg: string, fields?: object, level?: 'info' | 'warn' | 'error') => void;
  /** Serve https with this certificate and key (PEM) instead of plain http. */
  tls?: { cert: Buffer; key: Buffer };
  /** Keep the packs upload-pack makes, one per request (pack-cache.ts), whole answers to fetches of main (fetch-cache.ts), and answer nodes' ref advertisements from the ref files (ref-advert.ts); default true. */
  packCache?: boolean;
  /** Take a node's report push in-process when git would take it as it is (report-receive.ts); default true. */
  receive?: boolean;
  /** Git processes run at once for nodes' requests, and their requests that may wait for one before the rest are answered 429 (git-slots.ts); defaults GIT_PROCESSES and GIT_QUEUE. */
  gitProcesses?: number;
  gitQueue?: number;
}

/** Git processes at once for nodes' requests by default: four a core (some only send a pack to a slow link), at least eight. */
export const GIT_PROCESSES = Math.max(8, 4 * availableParallelism());
/** Nodes' requests that may wait for a git process by default. */
export const GIT_QUEUE = 256;

/** Serve every bare repository DATA/NAME.git at /NAME.git over smart HTTP through the real `git http-backend`. */
export async function startGitServer(opts: GitServerOptions): Promise<GitServer> {
  const data = await checkedDir(opts.data, 'data');
  const packCache = opts.packCache === false ? { config: [], close: () => {} } : openPackCache(data);
  const fetchCache = opts.packCache === false ? undefined : openFetchCache();
  const adverts = opts.packCache === false ? undefined : nodeAdverts();
  const receiver = opts.receive === false ? undefined : reportReceiver();
  const packages = opts.packages === undefined ? undefined : await checkedDir(opts.packages, 'packages');
  const backend = await httpBackendPath();
  const authorize = opts.authorize ?? allowAll;
  const log = opts.log ?? (() => {});
  const runs = new Set<CgiRun>();
  const slots = gitSlots({ processes: opts.gitProcesses ?? GIT_PROCESSES, queue: opts.gitQueue ?? GIT_QUEUE });
  let closing: Promise<void> | undefined;

  const handle = async (req: IncomingMessage, res: ServerResponse, seen: Seen): Promise<void> => {
    const r = route(req.method ?? 'GET', req.url ?? '/');
    if (r.kind === 'error') return plain(res, r.status, r.message);
    if (r.kind === 'packages') {
      if (packages === undefined) return plain(res, 404, 'no package repository is served here (start with --packages DIR)');
      return servePackageFile(packages, r.file, req, res);
    }
    if (!(await isRepo(join(data, r.repo)))) return plain(res, 404, `repository not found: /${r.repo}`);
    const verdict = await authorize({ ...parseBasicAuth(req.headers.authorization), repo: r.repo, service: r.kind === 'git' ? r.service : 'upload-pack' });
    if (!verdict.ok) {
      if (verdict.status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="mesh", charset="UTF-8"');
      return plain(res, verdict.status, verdict.message);
    }
    seen.user = verdict.user;
    if (closing) return plain(res, 503, 'the server is shutting down'); // close() waits only for children it saw
    /** A git process's slot for this request: none needed for an operator's; null when the queue is full (the request is then answered 429). */
    const slot = async (): Promise<Release | null> => {
      if (verdict.role === 'operator') return () => {};
      const gone = new AbortController();
      res.once('close', () => gone.abort()); // the client hung up (or the answer is done, when this no longer matters)
      const release = await slots.enter(gone.signal);
      if (release === null) {
        log('busy', { path: (req.url ?? '').split('?')[0], user: verdict.user, ...slots.load }, 'warn');
        res.setHeader('Retry-After', String(slots.retryAfter()));
        plain(res, 429, `mesh: the server runs as many git processes as it may and ${slots.load.waiting} requests wait for one: try again later`);
      }
      return release;
    };
    if (r.kind === 'report-pack') {
      // Every node's reports: an operator's (or, on an --open server, anyone's), never a node's.
      if (verdict.role === 'node') return plain(res, 403, 'mesh: a node reads only main and its own report branch');
      const length = Number(req.headers['content-length']);
      if (!(length > 0 && length <= MAX_REPORT_PACK_BODY) || req.headers['content-encoding'] !== undefined) return plain(res, 413, `mesh: a request names at most ${MAX_REPORT_PACK_BODY} bytes of ids, uncompressed, with its length`);
      const release = await slot();
      if (!release) return;
      if (res.destroyed) return release(); // the client went away while it waited
      try {
        return await answerReportPack(join(data, r.repo), await readBody(req), res);
      } finally {
        release();
      }
    }
    // A host's poll of main is answered here, without starting git (ls-refs.ts); anything else goes to git.
    let body: NodeJS.ReadableStream = req;
    const small = smallUploadPack(req, r.service, r.pathInfo);
    if (small === 'poll') {
      const bytes = await readBody(req);
      const answer = answerMainPoll(bytes, join(data, r.repo));
      if (answer) return void res.writeHead(200, GIT_RESULT).end(answer);
      body = Readable.from([bytes]);
    }
    let keep: { limit: number; settle: (answer: CachedAnswer | null) => void } | undefined;
    // A node's ref advertisement before a fetch is built here when it can list only HEAD, main and its own branch (ref-advert.ts).
    if (adverts && verdict.role === 'node' && r.service === 'upload-pack' && r.pathInfo.endsWith('/info/refs') && req.headers['git-protocol'] === undefined) {
      const dir = join(data, r.repo);
      const answer = adverts.answer(dir, verdict.user);
      if (answer) {
        seen.cached = true;
        return void send(res, answer);
      }
      const settle = adverts.learn(dir, verdict.user);
      if (settle) keep = { limit: MAX_ANSWER, settle };
    }
    // A fetch of main the same as one answered before is answered with that answer (fetch-cache.ts).
    if (fetchCache && small === 'fetch') {
      const bytes = await readBody(req);
      const key = fetchCache.key(join(data, r.repo), bytes, req.headers['git-protocol'] as string | undefined);
      const earlier = key === null ? undefined : fetchCache.get(key);
      const answer = earlier && (await earlier);
      if (answer) {
        seen.cached = true;
        return void send(res, answer);
      }
      if (key !== null && earlier === undefined) keep = { limit: MAX_ANSWER, settle: fetchCache.pending(key) };
      body = Readable.from([bytes]);
    }
    // A push's ref updates are decided here, by the rules every git server shares (core/access/rules.ts), before git starts.
    if (verdict.role && r.service === 'receive-pack' && r.pathInfo.endsWith('/git-receive-pack')) {
      // A node's small push is read whole: it may be taken here, without git (report-receive.ts).
      const whole = receiver && verdict.role === 'node' && smallPush(req) ? await readBody(req) : undefined;
      const dir = join(data, r.repo);
      const push = await decidePush(req, { user: verdict.user, role: verdict.role }, dir, whole && Readable.from([whole]));
      if (push.answer) {
        for (const message of push.messages) log('push refused', { path: r.pathInfo, user: verdict.user, message }, 'warn');
        return void res.writeHead(push.answer.status, push.answer.headers).end(push.answer.body);
      }
      const taken = whole && (await receiver!.receive(dir, verdict.user, push.push, whole));
      if (taken) {
        seen.inProcess = true;
        return void res.writeHead(200, RESULT).end(taken);
      }
      body = push.body;
    }
    const release = await slot();
    if (!release) return keep?.settle(null);
    if (res.destroyed) {
      keep?.settle(null);
      return release(); // the client went away while it waited
    }
    const env = cgiEnv({ projectRoot: data, ...r, user: verdict.user, ...(verdict.role ? { role: verdict.role } : {}), gitConfig: [...packCache.config, ...(verdict.gitConfig ?? [])] }, req);
    const run = runCgi(backend, env, body, res, (message) => log('git http-backend failed', { path: r.pathInfo, message }, 'error'),
      (message) => log('push refused', { path: r.pathInfo, user: verdict.user, message }, 'warn'), keep);
    runs.add(run);
    void run.done.then(() => {
      runs.delete(run);
      release();
    });
  };

  // Keep-alive outlasts the hosts' 60 s agents; a push of a large pack may take long on a slow link.
  const serverOptions = { keepAliveTimeout: 65_000, requestTimeout: 3_600_000 };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const started = Date.now();
    const seen: Seen = { user: null };
    res.on('close', () => log('request', {
      method: req.method, path: (req.url ?? '').split('?')[0], status: res.statusCode,
      ms: Date.now() - started, user: seen.user, ...(seen.cached ? { cached: true } : {}), ...(seen.inProcess ? { inProcess: true } : {}), ...(res.writableFinished ? {} : { aborted: true }),
    }));
    handle(req, res, seen).catch((e: unknown) => {
      log('request failed', { path: req.url, message: messageOf(e) }, 'error');
      if (!res.headersSent) plain(res, 500, 'internal error');
      else res.destroy();
    });
  };
  const server: Server = opts.tls ? createHttpsServer({ ...serverOptions, ...opts.tls }, onRequest) : createServer(serverOptions, onRequest);
  server.headersTimeout = 66_000;
  const port = await listen(server, opts.host ?? '127.0.0.1', opts.port ?? 8080);
  server.on('error', (e) => log('server error', { message: e.message }, 'error'));
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  const close = async (): Promise<void> => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const running = [...runs];
    for (const run of running) killGroup(run.child, 'SIGTERM');
    const escalate = setTimeout(() => { for (const run of runs) killGroup(run.child, 'SIGKILL'); }, 2000);
    await Promise.all(running.map((run) => run.done));
    clearTimeout(escalate);
    server.closeAllConnections();
    await closed;
    packCache.close();
    await receiver?.close();
  };
  return { url: `${opts.tls ? 'https' : 'http'}://${host}:${port}/`, port, gitLoad: () => slots.load, close: () => (closing ??= close()) };
}

/** What the request log says of a request beyond its method, path and status. */
interface Seen {
  user: string | null;
  /** Answered from the fetch cache, without git. */
  cached?: boolean;
  /** A push taken without git. */
  inProcess?: boolean;
}

/** The headers git http-backend gives an upload-pack result. */
const GIT_RESULT = { 'Content-Type': 'application/x-git-upload-pack-result', 'Cache-Control': 'no-cache, max-age=0, must-revalidate', Pragma: 'no-cache', Expires: 'Fri, 01 Jan 1980 00:00:00 GMT' };

/**
 * What a small upload-pack POST (not compressed, with its length given) may be, by the protocol
 * it speaks: a host's poll of main (protocol v2, at most MAX_POLL_BODY bytes, ls-refs.ts) or a
 * fetch to answer from the fetch cache (v0/v1, at most MAX_FETCH_BODY bytes); null for anything else.
 */
function smallUploadPack(req: IncomingMessage, service: string, pathInfo: string): 'poll' | 'fetch' | null {
  const length = Number(req.headers['content-length']);
  if (service !== 'upload-pack' || !pathInfo.endsWith('/git-upload-pack') || req.headers['content-encoding'] !== undefined || !Number.isInteger(length) || length <= 0) return null;
  const v2 = /(^|:)version=2(:|$)/.test(String(req.headers['git-protocol'] ?? ''));
  if (v2) return length <= MAX_POLL_BODY ? 'poll' : null;
  return length <= MAX_FETCH_BODY ? 'fetch' : null;
}

/** Whether a receive-pack POST is small enough to be read whole (its length given, not compressed). */
function smallPush(req: IncomingMessage): boolean {
  const length = Number(req.headers['content-length']);
  return req.headers['content-encoding'] === undefined && Number.isInteger(length) && length > 0 && length <= MAX_RECEIVE_BODY;
}

/** An answer kept or built in-process, sent as git gave it. */
function send(res: ServerResponse, answer: CachedAnswer): void {
  res.statusCode = answer.status;
  for (const [name, value] of answer.headers) res.appendHeader(name, value);
  res.end(answer.body);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function plain(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(message + '\n');
}

async function isRepo(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory() && (await stat(join(dir, 'HEAD'))).isFile();
  } catch {
    return false;
  }
}

async function httpBackendPath(): Promise<string> {
  try {
    const path = join(await gitExecPath(), 'git-http-backend');
    await access(path, constants.X_OK);
    return path;
  } catch (e) {
    throw new MeshError('E_GIT_MISSING', `cannot find git http-backend (${messageOf(e)}): install git, which provides $(git --exec-path)/git-http-backend`);
  }
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      const hint = e.code === 'EADDRINUSE' ? ': something else uses that port; pick another with --port, or --port 0 for a free one' : '';
      reject(new MeshError('E_SERVE_LISTEN', `cannot listen on ${host}:${port}: ${e.message}${hint}`, { data: { host, port }, cause: e }));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
