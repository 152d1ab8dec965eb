/**
 * Reaching a remote's git server over plain HTTP(S) from this process, without a git process,
 * where that reaches it as git would: what status asks most often (every branch's tip, and the
 * report commits by id, report-pack.ts). Anything else, and any answer that is not what it
 * should be, goes through git (status/git-remote.ts), which also says what went wrong.
 *
 * It is used only where that reaches the server as git would: an http(s) URL, no proxy (in the
 * environment or git's `http.*proxy`), no client certificate, extra header, cookie file, HTTP
 * version or disabled verification in git's `http.*` settings, no `url.*.insteadOf` rewriting; a
 * CA file from `http.sslCAInfo` or GIT_SSL_CAINFO is honoured. The credential is the remote URL's,
 * else what git's credential helpers give for it (`git credential fill`, never prompting).
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { git } from '../git.js';

/** Where requests go: the repository's URL (no credential in it), the credential, the CA. */
export interface Target {
  url: URL;
  auth: string | null;
  /** The credential is the one in the remote's URL (not a credential helper's). */
  authInUrl: boolean;
  ca?: Buffer;
}

/** A remote reached directly: its target resolved once, on first use (null: go through git). */
export interface Direct {
  target(): Promise<Target | null>;
  /** Ask no more: the server does not answer what is asked of it here. */
  forget(): void;
}

/** The remote `name` of the checkout at `dir` (a remote's name, or a URL). */
export function direct(dir: string, name: string): Direct {
  let target: Promise<Target | null> | null = null;
  return {
    target: () => (target ??= resolveTarget(dir, name).catch(() => null)),
    forget: () => void (target = Promise.resolve(null)),
  };
}

/** git's `http.*` settings under which a request from here would not be the one git makes. */
const UNLIKE_GIT = /^http\.(.*\.)?(proxy|sslcert|sslkey|extraheader|sslverify|cookiefile|emptyauth|sslbackend|version)$/;

async function resolveTarget(dir: string, name: string): Promise<Target | null> {
  if (['http_proxy', 'https_proxy', 'all_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY'].some((v) => process.env[v])) return null;
  const isUrl = /[:/]/.test(name);
  // One git process for the remote's URL and every setting that bears on the request (keys come lower-cased, values after a space).
  const pattern = isUrl ? '^(http|url)\\.' : `^(remote\\.${name.replace(/[.\\[\]*+?^$(){}|]/g, '\\$&')}\\.url|http\\.|url\\.)`;
  const settings = (await git(dir, ['config', '--get-regexp', pattern]).catch(() => '')).split('\n').filter(Boolean).map((l) => {
    const space = l.indexOf(' ');
    return space < 0 ? [l.toLowerCase(), ''] as const : [l.slice(0, space).toLowerCase(), l.slice(space + 1)] as const;
  });
  if (settings.some(([key]) => UNLIKE_GIT.test(key) || key.startsWith('url.'))) return null;
  const raw = isUrl ? name : settings.find(([key]) => key === `remote.${name.toLowerCase()}.url`)?.[1];
  if (!raw) return null;
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  const caFile = process.env.GIT_SSL_CAINFO || settings.find(([key]) => key === 'http.sslcainfo')?.[1];
  let auth: string | null = null;
  const authInUrl = Boolean(url.username);
  if (authInUrl) auth = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  else {
    const plain = new URL(url);
    const filled = await git(dir, ['credential', 'fill'], `url=${plain.toString()}\n\n`, { GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '', SSH_ASKPASS: '' }).catch(() => '');
    const field = (key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(filled)?.[1];
    const [user, password] = [field('username'), field('password')];
    if (user !== undefined && password !== undefined) auth = `${user}:${password}`;
  }
  url.username = '';
  url.password = '';
  url.pathname = url.pathname.replace(/\/$/, '');
  return { url, auth, authInUrl, ...(caFile && url.protocol === 'https:' ? { ca: readFileSync(caFile) } : {}) };
}

/** A request to `path` under the repository's URL (with its query), answered with the response as it starts. */
export function request(to: Target, method: 'GET' | 'POST', path: string, body?: { type: string; text: string }): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const url = new URL(to.url);
    const [pathname, search] = path.split('?');
    url.pathname += pathname;
    if (search !== undefined) url.search = `?${search}`;
    const headers: Record<string, string | number> = { 'User-Agent': 'git/2 (mesh-cli)' };
    if (body) Object.assign(headers, { 'Content-Type': body.type, 'Content-Length': Buffer.byteLength(body.text) });
    if (to.auth !== null) headers.Authorization = `Basic ${Buffer.from(to.auth).toString('base64')}`;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, { method, headers, ...(to.ca ? { ca: to.ca } : {}) }, resolve);
    req.on('error', reject);
    req.end(body?.text);
  });
}

/** The largest ref advertisement read (~10,000 branches take ~0.7 MB). */
const MAX_ADVERT = 256 << 20;

/**
 * Every branch (refs/heads/…) → its id, as `git ls-remote --heads` lists them, from the server's
 * smart-HTTP ref advertisement (protocol v0: one request, which every git server answers); null
 * when it gave none (any failure: the caller asks git, which says why); 'refused' when the server
 * refused the credential written in the remote's URL. git is then not asked: on a refusal git
 * tells the credential helpers that the credential is bad, and a helper such as `store` erases
 * the one it keeps for that user and host, which was never tried and may be right.
 */
export async function advertisedHeads(remote: Direct): Promise<Map<string, string> | null | 'refused'> {
  const to = await remote.target();
  if (!to) return null;
  const answer = await request(to, 'GET', '/info/refs?service=git-upload-pack').catch(() => null);
  if (!answer) return null;
  if (answer.statusCode === 401 && to.authInUrl) {
    answer.resume();
    return 'refused';
  }
  if (answer.statusCode !== 200 || answer.headers['content-type'] !== 'application/x-git-upload-pack-advertisement') {
    answer.resume();
    if (answer.statusCode === 200 || answer.statusCode === 404) remote.forget(); // a dumb server, or no git here
    return null;
  }
  const body = await readAll(answer).catch(() => null);
  return body && headsOf(body);
}

function readAll(answer: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    answer.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_ADVERT) answer.destroy(new Error('ref advertisement too large'));
      else chunks.push(c);
    });
    answer.on('end', () => resolve(Buffer.concat(chunks)));
    answer.on('error', reject);
    answer.on('aborted', () => reject(new Error('aborted')));
  });
}

const SERVICE = '# service=git-upload-pack\n';
const REF = /^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$/;

/**
 * The branches of a v0 advertisement (service line, flush, refs with the capabilities after the
 * first, flush); null when it is not one. The pkt-lines are walked in one latin1 string of the
 * whole answer (a character a byte, so their lengths hold), a line decoded as UTF-8 only where it
 * is not ASCII: at 10,000 report branches, a Buffer and a decode per line cost ~38 ms of the
 * status run's start.
 */
export function headsOf(body: Buffer): Map<string, string> | null {
  const text = body.toString('latin1');
  const ascii = !NOT_ASCII.test(text);
  const heads = new Map<string, string>();
  let part = 0; // 0: the service line, 1: its flush, 2: refs, 3: done
  for (let at = 0; at < text.length; ) {
    // The framing as core/git/pkt-line.ts pktLines reads it.
    const len = parseInt(text.slice(at, at + 4), 16);
    if (!(len >= 0) || at + Math.max(len, 4) > text.length || len === 3) return null;
    const [start, end] = [at + 4, at + len];
    at += Math.max(len, 4);
    if (part === 3) return null; // anything after the refs' flush
    if (len < 4) {
      if (len !== 0 || part === 0) return null;
      part = part === 1 ? 2 : 3;
      continue;
    }
    if (part === 0) {
      if (text.slice(start, end) !== SERVICE) return null;
      part = 1;
      continue;
    }
    if (part === 1) return null;
    let line = ascii || !NOT_ASCII.test(text.slice(start, end)) ? text.slice(start, end) : body.toString('utf8', start, end);
    if (line.endsWith('\n')) line = line.slice(0, -1);
    const nul = line.indexOf('\0');
    if (nul >= 0) line = line.slice(0, nul); // the first ref carries the capabilities
    const ref = REF.exec(line);
    if (!ref) return null;
    if (ref[2]!.startsWith('refs/heads/') && !ref[2]!.endsWith('^{}')) heads.set(ref[2]!, ref[1]!);
  }
  return part === 3 ? heads : null;
}

const NOT_ASCII = /[\x80-\xff]/;
