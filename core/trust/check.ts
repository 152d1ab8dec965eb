/**
 * Whether a tip of main may be used: the same check for a host (agent/trust/gate.ts) and for
 * the fleet server (mesh-cli/server/trusted-main.ts). The checks `git verify-commit` makes with
 * an allowed_signers file (an SSH signature, namespace "git", by a trusted key), and that the tip
 * descends from the last commit accepted (never backwards). The trusted keys change
 * only through a commit that passes the check against the keys trusted before it; `trust: none`
 * takes effect the same way. An operator allows a rollback with a marker commit at the tip,
 * signed by a trusted key, whose message ends with `Mesh-Allow-Rollback: <last applied commit or any>`.
 * `any` counts only for a marker committed after the host took its anchor: the committer time is
 * part of what the signature covers, so a server that replays an old `any` marker to a host that
 * has moved on since cannot roll it back again.
 */
import { keyPositionIn, loadYaml, type Loaded } from '../load.js';
import { MeshConfig } from '../../schema/fleet.js';
import type { Signer } from '../../schema/report.js';
import { parseCommitObject, trailers, type CommitObject } from '../git/commit.js';
import type { TreeReader } from '../declaration/declaration.js';
import { fingerprint, sameKeyIfWellFormed, verifySsh } from '../sign/sshsig.js';
import { keysOfLines, type TrustedKey, type TrustState } from './state.js';

export const ROLLBACK_TRAILER = 'Mesh-Allow-Rollback';

/** A refusal: a stable code, a message that says what to do, and who signed the refused commit (null: nobody trusted). */
export interface Refusal {
  code: 'E_UNSIGNED' | 'E_UNTRUSTED_SIGNER' | 'E_BAD_SIGNATURE' | 'E_BAD_COMMIT' | 'E_ROLLBACK' | 'E_ANCESTRY_UNKNOWN';
  message: string;
  signer: Signer | null;
}

export type CommitVerdict = { ok: true; signer: Signer } | ({ ok: false } & Refusal);

/** Check the signature of the raw commit object `raw` against `keys`. Never throws. */
export function verifyCommit(raw: Uint8Array, keys: TrustedKey[]): CommitVerdict {
  const parsed = parseCommitObject(raw);
  if (!parsed.ok) return { ok: false, code: 'E_BAD_COMMIT', message: `the commit cannot be read: ${parsed.reason}`, signer: null };
  return verifyParsed(parsed.commit, keys);
}

function verifyParsed(commit: CommitObject, keys: TrustedKey[]): CommitVerdict {
  const kind = commit.signatureKind;
  if (kind === 'none') return { ok: false, code: 'E_UNSIGNED', message: 'it is not signed', signer: null };
  if (kind !== 'ssh') return { ok: false, code: 'E_BAD_SIGNATURE', message: `it carries ${kind === 'pgp' ? 'an OpenPGP' : 'an unknown kind of'} signature; mesh checks SSH signatures (gpg.format=ssh)`, signer: null };
  const sig = verifySsh(commit.payload, commit.signature!, 'git');
  if (!sig.ok) return { ok: false, code: 'E_BAD_SIGNATURE', message: `its signature does not verify: ${sig.reason}`, signer: null };
  const print = fingerprint(sig.publicKey);
  const known = keys.find((k) => sameKeyIfWellFormed(k.key, sig.publicKey));
  if (!known) return { ok: false, code: 'E_UNTRUSTED_SIGNER', message: `it is signed by ${print}, which is not a trusted signer of this fleet`, signer: { fingerprint: print, name: null } };
  return { ok: true, signer: { fingerprint: print, name: known.name } };
}

/** Whether one commit is another or descends from it; `unknown` when the history at hand cannot tell. */
export type Ancestry = 'yes' | 'no' | 'unknown';

/** What the checker reads to decide: raw commits, the files of a commit, and ancestry (the host fetches more history to answer it). */
export interface TipSource {
  /** The raw content of commit `oid`, or null when it is not at hand (or not a commit). */
  readCommit(oid: string): Promise<Uint8Array | null>;
  tree(commit: string): TreeReader;
  descends(oid: string, ancestor: string): Promise<Ancestry>;
  /** At most this many commits are walked to follow a change of the signers (default 1000). */
  walkLimit?: number;
}

export type TipVerdict = { ok: true; signer: Signer | null; state: TrustState } | ({ ok: false } & Refusal);

/** Decide whether `tip` may be used, given the trust `state`; on success, the state after it. */
export async function checkTip(src: TipSource, state: TrustState, tip: string, now: Date): Promise<TipVerdict> {
  const anchor = state.anchor;
  if (anchor?.commit === tip) return { ok: true, signer: anchor.signer, state };
  const raw = await src.readCommit(tip);
  const parsed = raw === null ? null : parseCommitObject(raw);
  if (!parsed?.ok) return { ok: false, code: 'E_BAD_COMMIT', message: `${short(tip)} cannot be read from the local repository${parsed ? `: ${parsed.reason}` : ''}`, signer: null };
  const commit = parsed.commit;
  let verdict: CommitVerdict | null = state.mode === 'signed' ? verifyParsed(commit, state.signers) : null;
  if (anchor) {
    const ancestry = await src.descends(tip, anchor.commit);
    if (ancestry !== 'yes') {
      const values = trailers(commit.message, ROLLBACK_TRAILER);
      const stale = values.includes('any') && !committedSince(commit, anchor.at);
      const marked = values.some((v) => (v === 'any' && !stale) || (v.length >= 12 && anchor.commit.startsWith(v)));
      if (!marked || (verdict && !verdict.ok)) return rollback(tip, anchor, ancestry, { marked, stale }, verdict);
    } else if (verdict && !verdict.ok) {
      const keys = await rotatedKeys(src, state, tip, anchor.commit);
      if (keys) verdict = verifyParsed(commit, keys);
    }
  }
  if (verdict && !verdict.ok) return { ...verdict, message: `main's tip ${short(tip)} is not applied: ${verdict.message}` };
  const signer = verdict?.ok ? verdict.signer : null;
  const settings = await fleetTrust(src.tree(tip));
  return { ok: true, signer, state: { format: 1, ...(settings ?? { mode: state.mode, signers: state.signers }), anchor: { commit: tip, signer, at: now.toISOString() } } };
}

/**
 * Whether `commit` was committed no earlier than the second the host took its anchor (`at`). The
 * committer time is the operator's clock: a marker made within clock skew of that moment may be
 * refused, and one that names the anchor's commit is never affected.
 */
function committedSince(commit: CommitObject, at: string): boolean {
  const head = commit.payload.toString('utf8');
  const end = head.indexOf('\n\n');
  const seconds = /^committer .* (\d+) [+-]\d{4}$/m.exec(end < 0 ? head : head.slice(0, end))?.[1];
  const since = Date.parse(at);
  return seconds !== undefined && !Number.isNaN(since) && Number(seconds) >= Math.floor(since / 1000);
}

function rollback(tip: string, anchor: NonNullable<TrustState['anchor']>, ancestry: 'no' | 'unknown', marker: { marked: boolean; stale: boolean }, verdict: CommitVerdict | null): { ok: false } & Refusal {
  const why = ancestry === 'no' ? `does not descend from ${short(anchor.commit)}, the last commit this host applied (main was force-pushed back or rewritten)` : `cannot be shown to descend from ${short(anchor.commit)}, the last commit this host applied, within the history it fetched`;
  const unsigned = marker.marked && verdict && !verdict.ok ? `; its ${ROLLBACK_TRAILER} marker does not count because ${verdict.message}` : '';
  const stale = marker.stale && !marker.marked ? `; its '${ROLLBACK_TRAILER}: any' marker does not count because it was committed before this host applied ${short(anchor.commit)} (at ${anchor.at}): an old marker replayed would roll the host back again` : '';
  const allow = `to allow going back, commit on top of the older main a marker signed by a trusted key, with the trailer '${ROLLBACK_TRAILER}: ${anchor.commit}' (or 'any'), and push it`;
  const signer = verdict?.ok ? verdict.signer : verdict ? verdict.signer : null;
  return { ok: false, code: ancestry === 'no' ? 'E_ROLLBACK' : 'E_ANCESTRY_UNKNOWN', message: `rollback refused: main's tip ${short(tip)} ${why}${unsigned}${stale}; ${allow}`, signer };
}

/**
 * The keys trusted at `tip` when the signers changed between `anchor` and it: walking main's
 * first-parent line from the anchor, a commit that changes mesh.yaml counts only if the keys
 * trusted just before it signed it. Null when the line does not reach the anchor.
 */
async function rotatedKeys(src: TipSource, state: TrustState, tip: string, anchor: string): Promise<TrustedKey[] | null> {
  const line: Array<{ oid: string; commit: CommitObject }> = [];
  for (let oid = tip; oid !== anchor; ) {
    const raw = line.length < (src.walkLimit ?? 1000) ? await src.readCommit(oid) : null;
    const parsed = raw === null ? null : parseCommitObject(raw);
    if (!parsed?.ok || parsed.commit.parents.length === 0) return null;
    line.unshift({ oid, commit: parsed.commit });
    oid = parsed.commit.parents[0]!;
  }
  let keys = state.signers;
  let before = await src.tree(anchor).read('mesh.yaml');
  for (const { oid, commit } of line) {
    const text = await src.tree(oid).read('mesh.yaml');
    if (text !== before && verifyParsed(commit, keys).ok) keys = (await fleetTrust(src.tree(oid)))?.signers ?? keys;
    before = text;
  }
  return keys;
}

/** mesh.yaml's trust settings at a commit, or null when it has none that can be taken (fleetSettings). */
export async function fleetTrust(tree: TreeReader): Promise<Pick<TrustState, 'mode' | 'signers'> | null> {
  const text = await tree.read('mesh.yaml').catch(() => null);
  if (text === null) return null;
  const loaded = fleetSettings(text);
  if (!loaded.ok) return null;
  return { mode: loaded.value.trust, signers: loaded.value.signers.map((s) => ({ name: s.name, key: keysOfLines([s.key])[0]!.key })) };
}

/**
 * mesh.yaml's text read as hosts take it: a file that does not read, or that keeps `trust: signed`
 * (the default) with no signer, is refused with its place, because a host that took it would apply
 * no later commit (nobody could sign one it trusts). `validate` says the same; a host applies
 * nothing of such a commit and keeps its trusted keys (agent/reconcile.ts).
 */
export function fleetSettings(text: string): Loaded<MeshConfig> {
  const loaded = loadYaml(text, 'mesh.yaml', MeshConfig);
  if (!loaded.ok || loaded.value.trust !== 'signed' || loaded.value.signers.length > 0) return loaded;
  const place = /^signers\s*:/m.test(text) ? keyPositionIn(text, [], 'signers') : keyPositionIn(text, [], 'trust');
  const message = "trust is 'signed' (the default) and no signer is listed, so hosts would apply no commit after this one: list the key that signs main under signers (mesh-cli init does), or set trust: none while you try mesh out";
  return { ok: false, problems: [{ file: 'mesh.yaml', ...place, message }] };
}

function short(oid: string): string {
  return oid.slice(0, 12);
}
