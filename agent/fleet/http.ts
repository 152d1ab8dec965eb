/**
 * The HTTP client the host gives isomorphic-git: its own keep-alive agent (Node's default
 * agent dropped sockets after 5 s of silence under load), a patient timeout on every request
 * (a server working through a queue is waited for, not retried: retries only add to the queue;
 * a server that is down fails at once, at connect), the
 * node's credential sent up front rather than after a 401, a meter of requests and bytes on
 * the wire, and a server that says "busy" (429/503) turned into a retryable error that
 * carries how long the server asked us to wait.
 *
 * Over https the server is checked as any https client would (the system's certificate
 * authorities), unless the token pinned a certificate: then the host trusts exactly that
 * certificate, CA or not, and checks it before a byte of the request (the credential) is sent.
 */
import { Agent, type AgentOptions, type ClientRequest, type ClientRequestArgs } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import base from 'isomorphic-git/http/node';
import type { GitHttpResponse, HttpClient } from 'isomorphic-git';
import { MeshError } from '../../core/errors.js';
import { pinOfFingerprint } from '../../core/tls-pin.js';

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
  /** This machine's clock against the server's, from the Date header of the last answer that had one; null before one. */
  clock(): ServerClock | null;
}

export interface ServerClock {
  /** How far this machine's clock is ahead of the server's (negative: behind), in ms; the header's second is its whole resolution. */
  skewMs: number;
}

/**
 * How long an idle keep-alive connection is kept: long enough to carry one pass (poll, fetch,
 * push), shorter than servers keep theirs (Node 65 s, nginx 75 s, Apache 5 s), so that a pass
 * never sends on a connection the server is closing (ECONNRESET, seen with 1,000 hosts at once).
 */
const IDLE_MS = 4_000;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- TypeScript's mixin rule
type AgentClass = new (...args: any[]) => Agent;

/** `Base` (http's or https's Agent) that counts the bytes of every socket it opens, open or closed, and closes idle ones after IDLE_MS. */
function metered<B extends AgentClass>(Base: B) {
  return class MeteredAgent extends Base {
    readonly closed = { sent: 0, received: 0 };
    readonly open = new Set<Socket>();
    readonly requestTimeoutMs: number;

    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- TypeScript's mixin rule
    constructor(...args: any[]) {
      super(...args);
      this.requestTimeoutMs = (args[0] as AgentOptions | undefined)?.timeout ?? 0;
    }

    /** Count `socket` in the meter (every socket this agent makes comes through here). */
    track<S extends Socket>(socket: S): S {
      this.open.add(socket);
      socket.once('close', () => {
        this.open.delete(socket);
        this.closed.sent += socket.bytesWritten;
        this.closed.received += socket.bytesRead;
      });
      return socket;
    }

    override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
      return this.track(super.createConnection(options, callback) as Socket);
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
  };
}

const MeteredHttp = metered(Agent);
const MeteredHttps = metered(HttpsAgent);

/** An https agent that trusts exactly the certificate whose SHA-256 is `pin`: the request is handed the socket only after that check. */
class PinnedAgent extends MeteredHttps {
  constructor(options: AgentOptions, private readonly pin: string) {
    super(options);
  }

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const host = options.host ?? 'localhost';
    const servername = isIP(host) ? undefined : ((options as { servername?: string }).servername ?? host);
    // No CA check (a pinned certificate is usually self-signed): the pin below is the whole check.
    const socket = this.track(tlsConnect({ ...(options as object), host, ...(servername ? { servername } : {}), rejectUnauthorized: false }));
    const fail = (e: Error) => callback?.(e, socket);
    const stalled = () => socket.destroy(new Error('the TLS handshake timed out')); // before the handover, nobody else watches the socket
    socket.once('error', fail);
    socket.once('timeout', stalled);
    socket.once('secureConnect', () => {
      socket.off('error', fail).off('timeout', stalled);
      const got = pinOfFingerprint(socket.getPeerCertificate().fingerprint256 ?? '');
      if (got === this.pin) return callback?.(null, socket);
      socket.destroy();
      callback?.(pinMismatch(`${host}:${options.port ?? 443}`, got, this.pin), socket);
    });
    return undefined; // handed over through the callback, once checked
  }
}

function pinMismatch(where: string, got: string, pin: string): MeshError {
  return new MeshError(
    'E_TLS_PIN',
    `the server at ${where} presented a TLS certificate whose SHA-256 is ${got || 'unknown'}, not ${pin}, the one this host's token pinned: nothing was sent to it. ` +
      `If the fleet's certificate was replaced on purpose, re-enrol this host with a new token ('mesh-cli token issue NODE'); otherwise something is impersonating the server`,
    { next: 'retry' },
  );
}

/** How long a request may go without a byte from the server. */
export const DEFAULT_TIMEOUT_MS = 5 * 60_000;

/** A fresh HTTP client for isomorphic-git; `pin`: trust exactly the https certificate whose SHA-256 it is. */
export function fleetHttp(opts: { timeoutMs?: number; credential?: Credential; pin?: string } = {}): FleetHttp {
  const timeout = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const agentOptions: AgentOptions = { keepAlive: true, timeout };
  const agents = { http: new MeteredHttp(agentOptions), https: opts.pin ? new PinnedAgent(agentOptions, opts.pin) : new MeteredHttps(agentOptions) };
  const auth = opts.credential ? 'Basic ' + Buffer.from(`${opts.credential.username}:${opts.credential.password}`).toString('base64') : undefined;
  let requests = 0;
  let clock: ServerClock | null = null;
  return {
    async request(req) {
      requests += 1;
      // isomorphic-git mutates headers: every request gets its own object.
      const headers = { ...(req.headers ?? {}), ...(auth ? { authorization: auth } : {}) };
      const agent = req.url.startsWith('https:') ? agents.https : agents.http;
      const sent = Date.now();
      const res = await base.request({ ...req, headers, agent, fetchOptions: { timeout } } as Parameters<HttpClient['request']>[0]);
      const date = headerOf(res, 'date');
      const server = date === undefined ? NaN : Date.parse(date);
      if (!Number.isNaN(server)) clock = { skewMs: Math.round((sent + Date.now()) / 2 - server) };
      if (res.statusCode === 429 || res.statusCode === 503) throw await busy(req.url, res);
      return res;
    },
    clock: () => clock,
    meter() {
      const all = [agents.http, agents.https];
      const live = all.flatMap((a) => [...a.open]);
      return {
        requests,
        sent: all.reduce((n, a) => n + a.closed.sent, 0) + live.reduce((n, s) => n + s.bytesWritten, 0),
        received: all.reduce((n, a) => n + a.closed.received, 0) + live.reduce((n, s) => n + s.bytesRead, 0),
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
