/**
 * The HTTP client the host gives isomorphic-git: its own keep-alive agent (Node's default
 * agent dropped sockets after 5 s of silence under load), a timeout on every request, and
 * the node's credential sent up front rather than after a 401.
 */
import { Agent } from 'node:http';
import base from 'isomorphic-git/http/node';
import type { HttpClient } from 'isomorphic-git';

export interface Credential {
  username: string;
  password: string;
}

/** A fresh HTTP client for isomorphic-git. */
export function fleetHttp(opts: { timeoutMs?: number; credential?: Credential } = {}): HttpClient {
  const agent = new Agent({ keepAlive: true, timeout: 60_000 });
  const auth = opts.credential ? 'Basic ' + Buffer.from(`${opts.credential.username}:${opts.credential.password}`).toString('base64') : undefined;
  return {
    request(req) {
      // isomorphic-git mutates headers: every request gets its own object.
      const headers = { ...(req.headers ?? {}), ...(auth ? { authorization: auth } : {}) };
      return base.request({ ...req, headers, agent, fetchOptions: { timeout: opts.timeoutMs ?? 60_000 } } as Parameters<HttpClient['request']>[0]);
    },
  };
}
