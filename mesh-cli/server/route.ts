import type { Service } from './auth.js';
import { REPORT_PACK_PATH } from './report-pack.js';

/** What a request URL asks for: a smart HTTP git endpoint, a package file, report commits by id (report-pack.ts), or an error to answer with. */
export type Route =
  | { kind: 'git'; repo: string; pathInfo: string; query: string; service: Service }
  | { kind: 'packages'; file: string }
  | { kind: 'report-pack'; repo: string }
  | { kind: 'error'; status: 400 | 404 | 405; message: string };

const REPO_NAME = /^[A-Za-z0-9._-]+\.git$/;

/**
 * Map a request to a route without touching the filesystem. Only the smart HTTP endpoints are
 * routed: the dumb protocol (GET /objects/…, /HEAD, plain /info/refs) would bypass hideRefs.
 */
export function route(method: string, rawUrl: string): Route {
  const q = rawUrl.indexOf('?');
  const rawPath = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const query = q < 0 ? '' : rawUrl.slice(q + 1);
  let path: string;
  try {
    path = decodeURIComponent(rawPath);
  } catch {
    return { kind: 'error', status: 400, message: 'bad request: the path is not valid percent-encoding' };
  }
  const segments = path.split('/');
  if (!path.startsWith('/') || path.includes('\0') || path.includes('\\') || segments.some((s) => s === '..')) {
    return { kind: 'error', status: 400, message: 'bad request: the path must not contain ".." or backslashes' };
  }
  if (segments[1] === 'packages' && segments.length > 2) {
    if (method !== 'GET' && method !== 'HEAD') return { kind: 'error', status: 405, message: 'packages are read-only' };
    return { kind: 'packages', file: segments.slice(2).join('/') };
  }
  const repo = segments[1] ?? '';
  if (!REPO_NAME.test(repo)) return { kind: 'error', status: 404, message: `not found: ${path}` };
  const rest = '/' + segments.slice(2).join('/');
  if (rest === REPORT_PACK_PATH) {
    if (method !== 'POST') return { kind: 'error', status: 405, message: `${method} is not allowed on ${path}` };
    return { kind: 'report-pack', repo };
  }
  const service = smartService(method, rest, new URLSearchParams(query).get('service'));
  if (service === null) {
    return { kind: 'error', status: 404, message: `not found: ${path} (only smart HTTP git is served)` };
  }
  if (service === 'method') return { kind: 'error', status: 405, message: `${method} is not allowed on ${path}` };
  return { kind: 'git', repo, pathInfo: `/${repo}${rest}`, query, service };
}

function smartService(method: string, rest: string, queryService: string | null): Service | 'method' | null {
  if (rest === '/info/refs') {
    if (queryService !== 'git-upload-pack' && queryService !== 'git-receive-pack') return null;
    return method === 'GET' ? (queryService.slice(4) as Service) : 'method';
  }
  if (rest === '/git-upload-pack' || rest === '/git-receive-pack') {
    return method === 'POST' ? (rest.slice(5) as Service) : 'method';
  }
  return null;
}
