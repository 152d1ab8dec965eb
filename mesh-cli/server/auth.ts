/** The two git services a smart HTTP request can reach. */
export type Service = 'upload-pack' | 'receive-pack';

/** What an Authorizer is asked: who (from HTTP basic auth, null when absent), which repository, which service. */
export interface AuthRequest {
  user: string | null;
  password: string | null;
  repo: string;
  service: Service;
}

/**
 * An Authorizer's answer. `gitConfig` pairs are handed to the git process through
 * GIT_CONFIG_COUNT (e.g. per-node `uploadpack.hideRefs` / `receive.hideRefs`); `role` reaches
 * git's hooks as MESH_ROLE (and the user as REMOTE_USER), which is how the pre-receive hook
 * knows who is pushing.
 */
export type AuthResult =
  | { ok: true; user: string; role?: 'operator' | 'node'; gitConfig?: Array<[string, string]> }
  | { ok: false; status: 401 | 403; message: string };

/** Decides whether a request may reach git; the seam for per-node credentials. May be async. */
export type Authorizer = (req: AuthRequest) => AuthResult | Promise<AuthResult>;

/** The default Authorizer: everyone is allowed, as user `anonymous` (the server listens on 127.0.0.1). */
export const allowAll: Authorizer = () => ({ ok: true, user: 'anonymous' });

/** User and password from an `Authorization: Basic …` header; nulls when absent or not basic. */
export function parseBasicAuth(header: string | undefined): { user: string | null; password: string | null } {
  const match = /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header ?? '');
  if (!match) return { user: null, password: null };
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return { user: decoded, password: null };
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
