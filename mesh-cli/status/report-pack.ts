/**
 * Report commits fetched by id from `mesh-cli serve` in one request (server/report-pack.ts),
 * indexed into the report store by `git index-pack`: the same objects a shallow `git fetch` of
 * the same tips brings, without its negotiation. Used for the tips of a status run, one commit
 * deep; anything else, and every server that does not answer it (any other git server: 404),
 * goes through `git fetch` as before, which also says what went wrong when something did.
 *
 * It speaks plain HTTP(S) with Node, so it is used only where that reaches the server as git
 * would: no proxy (in the environment or git's `http.*proxy`), no client certificate, extra
 * header or disabled verification in git's `http.*` settings; a CA file from `http.sslCAInfo` or
 * GIT_SSL_CAINFO is honoured. The credential is the remote URL's, else what git's credential
 * helpers give for it (`git credential fill`, never prompting).
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { git, spawnGit } from '../git.js';
import { REPORT_PACK_PATH } from '../server/report-pack.js';

/** Fetches report commits into the store by id; false when it could not (the caller fetches with git). */
export type ReportPackFetch = (wants: string[]) => Promise<boolean>;

/**
 * A ReportPackFetch for the remote `name` (a remote of the checkout at `dir`, or a URL) into the
 * bare repository `store`. After a server answers that it has no such endpoint, or the way to it
 * is not plain, it is not asked again.
 */
export function reportPackFetch(dir: string, name: string, store: string): ReportPackFetch {
  let target: Promise<Target | null> | null = null;
  return async (wants) => {
    const to = await (target ??= resolveTarget(dir, name).catch(() => null));
    if (!to || wants.length === 0) return false;
    const answer = await post(to, wants.join('\n') + '\n').catch(() => null);
    if (!answer) return false;
    if (answer.statusCode !== 200) {
      answer.resume();
      if (answer.statusCode === 404 || answer.statusCode === 405) target = Promise.resolve(null); // not a mesh-cli serve
      return false;
    }
    return indexPack(store, answer);
  };
}

interface Target {
  url: URL;
  auth: string | null;
  ca?: Buffer;
}

async function resolveTarget(dir: string, name: string): Promise<Target | null> {
  const raw = /[:/]/.test(name) ? name : (await git(dir, ['remote', 'get-url', name])).trim();
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (['http_proxy', 'https_proxy', 'all_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY'].some((v) => process.env[v])) return null;
  const settings = (await git(dir, ['config', '--get-regexp', '^http\\.']).catch(() => '')).split('\n').filter(Boolean).map((l) => l.split(' ')[0]!.toLowerCase());
  if (settings.some((key) => /(^|\.)(proxy|sslcert|sslkey|extraheader|sslverify|cookiefile|emptyauth|sslbackend|version)$/.test(key))) return null;
  const caFile = process.env.GIT_SSL_CAINFO || (await git(dir, ['config', '--get', 'http.sslCAInfo']).catch(() => '')).trim();
  let auth: string | null = null;
  if (url.username) auth = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  else {
    const plain = new URL(url);
    const filled = await git(dir, ['credential', 'fill'], `url=${plain.toString()}\n\n`, { GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '', SSH_ASKPASS: '' }).catch(() => '');
    const field = (key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(filled)?.[1];
    const [user, password] = [field('username'), field('password')];
    if (user !== undefined && password !== undefined) auth = `${user}:${password}`;
  }
  url.username = '';
  url.password = '';
  url.pathname = url.pathname.replace(/\/$/, '') + REPORT_PACK_PATH;
  return { url, auth, ...(caFile && url.protocol === 'https:' ? { ca: readFileSync(caFile) } : {}) };
}

function post(to: Target, body: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body) };
    if (to.auth !== null) headers.Authorization = `Basic ${Buffer.from(to.auth).toString('base64')}`;
    const send = to.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(to.url, { method: 'POST', headers, ...(to.ca ? { ca: to.ca } : {}) }, resolve);
    req.on('error', reject);
    req.end(body);
  });
}

/** Pipe the answer into `git index-pack --stdin` in `store`; true when git indexed a whole pack. */
function indexPack(store: string, answer: IncomingMessage): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawnGit(store, [`--git-dir=${store}`, 'index-pack', '--stdin']);
    child.stdout.resume();
    child.stderr.resume();
    child.stdin.on('error', () => undefined); // index-pack stopped reading: its exit says why
    answer.on('error', () => child.stdin.destroy());
    answer.on('aborted', () => child.stdin.destroy());
    answer.pipe(child.stdin);
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code === 0));
  });
}
