/**
 * The HTTP client the host gives isomorphic-git: its own keep-alive agent (Node's default
 * agent dropped sockets after 5 s of silence under load), a patient timeout on every request
 * (a server working through a queue is waited for, not retried: retries only add to the queue;
 * a server that is down fails at once, at connect), the
 * node's credential sent up front rather than after a 401, a meter of requests and bytes on
 * the wire, and a server that says "busy" (429/503) turned into a retryable error that
 * carries how long the server asked us to wait.
 */
import { Agent, type ClientRequest, type ClientRequestArgs } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import base from 'isomorphic-git/http/node';
import type { GitHttpResponse, HttpClient } from 'isomorphic-git';
import { MeshError } from '../../core/errors.js';

/** HTTP basic credentials: the node name and the credential its token carried. */
export interface Credential {
  username: string;
  password: string;
}

/** Requests made and bytes sent and received on the wire (HTTP headers included) since the client was made. */
export interface Meter {
  requests: number;
  sent: number;
  received: number;
}

/** An isomorphic-git HTTP client that also reports what it has cost. */
export interface FleetHttp extends HttpClient {
  meter(): Meter;
}

/**
 * How long an idle keep-alive connection is kept: long enough to carry one pass (poll, fetch,
 * push), shorter than servers keep theirs (Node 65 s, nginx 75 s, Apache 5 s), so that a pass
 * never sends on a connection the server is closing (ECONNRESET, seen with 1,000 hosts at once).
 */
const IDLE_MS = 4_000;

/** Counts the bytes of every socket the agent opens, open or closed, and closes idle ones after IDLE_MS. */
class MeteredAgent extends Agent {
  readonly closed = { sent: 0, received: 0 };
  readonly open = new Set<Socket>();

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const socket = super.createConnection(options, callback) as Socket;
    this.open.add(socket);
    socket.once('close', () => {
      this.open.delete(socket);
      this.closed.sent += socket.bytesWritten;
      this.closed.received += socket.bytesRead;
    });
    return socket;
  }

  constructor(private readonly requestTimeoutMs: number) {
    super({ keepAlive: true, timeout: requestTimeoutMs });
  }

  // A socket taken from the pool gets the request timeout back (Node leaves it at IDLE_MS otherwise).
  override reuseSocket(socket: Duplex, request: ClientRequest): void {
    super.reuseSocket(socket, request);
    (socket as Socket).setTimeout(this.requestTimeoutMs);
  }

  // Node returns whether to keep the socket (its types say void): pass that on.
  override keepSocketAlive(socket: Duplex): void {
    const keep = super.keepSocketAlive(socket) as unknown;
    if ((socket as Socket).timeout === undefined || (socket as Socket).timeout! > IDLE_MS) (socket as Socket).setTimeout(IDLE_MS); // the agent destroys a free socket that times out
    return keep as void;
  }
}

/** How long a request may go without a byte from the server. */
export const DEFAULT_TIMEOUT_MS = 5 * 60_000;

/** A fresh HTTP client for isomorphic-git. */
export function fleetHttp(opts: { timeoutMs?: number; credential?: Credential } = {}): FleetHttp {
  const timeout = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const agent = new MeteredAgent(timeout);
  const auth = opts.credential ? 'Basic ' + Buffer.from(`${opts.credential.username}:${opts.credential.password}`).toString('base64') : undefined;
  let requests = 0;
  return {
    async request(req) {
      requests += 1;
      // isomorphic-git mutates headers: every request gets its own object.
      const headers = { ...(req.headers ?? {}), ...(auth ? { authorization: auth } : {}) };
      const res = await base.request({ ...req, headers, agent, fetchOptions: { timeout } } as Parameters<HttpClient['request']>[0]);
      if (res.statusCode === 429 || res.statusCode === 503) throw await busy(req.url, res);
      return res;
    },
    meter() {
      const live = [...agent.open];
      return {
        requests,
        sent: agent.closed.sent + live.reduce((n, s) => n + s.bytesWritten, 0),
        received: agent.closed.received + live.reduce((n, s) => n + s.bytesRead, 0),
      };
    },
  };
}

/** The server is overloaded or limiting us: drain the answer and say when to come back. */
async function busy(url: string, res: GitHttpResponse): Promise<MeshError> {
  if (res.body) for await (const _ of res.body) void _; // frees the keep-alive socket
  const retryAfterMs = parseRetryAfter(headerOf(res, 'retry-after'), Date.now());
  const wait = retryAfterMs === null ? '' : `; it asked us to wait ${Math.ceil(retryAfterMs / 1000)} s`;
  return new MeshError('E_FLEET_BUSY', `the fleet repo at ${url.split('?')[0]} is busy (HTTP ${res.statusCode})${wait}`, {
    next: 'retry',
    data: { status: res.statusCode, ...(retryAfterMs === null ? {} : { retryAfterMs }) },
  });
}

function headerOf(res: GitHttpResponse, name: string): string | undefined {
  const found = Object.entries(res.headers ?? {}).find(([k]) => k.toLowerCase() === name);
  return found?.[1];
}

/** Retry-After as milliseconds from `now`: delta-seconds or an HTTP date (RFC 9110 §10.2.3); null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
