/**
 * What the host trusts, kept beside the store (<root>/var/lib/mesh-host/trust.json): the keys
 * that may sign main, whether the fleet checks signatures at all, and the anchor — the last
 * commit it accepted and reconciled, which every later tip must descend from. It starts at
 * enrolment from the token (the operator's word, carried by hand) and changes only through a
 * commit that passed the check against it. A missing file is rebuilt from the host config's
 * token signers; a broken one stops the host, like a broken store.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../atomic.js';
import { MeshError } from '../../core/errors.js';
import { TrustState } from '../../core/trust/state.js';
import type { HostPaths } from '../paths.js';

/** Where the trust state of the host at `paths` lives. */
export function trustPath(paths: HostPaths): string {
  return join(paths.stateDir, 'trust.json');
}

/** The trust state, or `initial` when the host has none yet; an unreadable file is an error a person must look at. */
export function readTrust(paths: HostPaths, initial: () => TrustState): TrustState {
  const path = trustPath(paths);
  if (!existsSync(path)) return initial();
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw unreadable(path, e instanceof Error ? e.message : String(e));
  }
  const parsed = TrustState.safeParse(data);
  if (!parsed.success) throw unreadable(path, parsed.error.issues[0]?.message ?? 'unexpected shape');
  return parsed.data;
}

/** Write the trust state durably. */
export function writeTrust(paths: HostPaths, state: TrustState): void {
  writeFileAtomic(trustPath(paths), JSON.stringify(state, null, 1) + '\n', 0o600);
}

function unreadable(path: string, why: string): MeshError {
  return new MeshError('E_TRUST_UNREADABLE', `the trust state ${path} cannot be read (${why}). mesh-host applies nothing until a person looks: restore it, or move it away and re-enrol with a new token`, {
    next: 'human',
    data: { path },
  });
}
