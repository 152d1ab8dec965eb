/**
 * Who may do what on `mesh-cli serve`. An operator (DATA/operators) may read and push; a node
 * authenticates as itself with the credential its token carried, checked against the sha256
 * that the node's node.yaml names on the newest trusted commit of main (trusted-main.ts: signed
 * as the hosts require; an unsigned or foreign-signed push to main changes no credential) of the
 * repository it asks for, wherever the
 * node sits under nodes/ (one `git ls-tree` of nodes/ per commit of main finds them all; a name
 * in two folders is refused, as `validate` explains). The
 * identity is read from git at every change of main (cached by main's commit; a node.yaml whose
 * blob did not change is not parsed again), so a pushed `mesh-cli revoke` or a new token refuses
 * the old credential at once. Whether main moved is
 * known from the stat of the files that hold it (main-stamp.ts), without a git process per
 * request; git is asked when they changed, or when they cannot be trusted. Which refs a push
 * may update is decided before git starts (push-rules.ts, by core/access/rules.ts), what a
 * node's commits may hold by the pre-receive hook (hooks.ts); its advertisements hide every other
 * node's report branch, so they stay small however many nodes the fleet has.
 */
import { join } from 'node:path';
import { NODE_NAME, NodeIdentity } from '../../schema/fleet.js';
import { loadYaml } from '../../core/load.js';
import type { Authorizer, AuthResult } from './auth.js';
import { enrolmentsDir } from './hooks.js';
import { mainStamp, mainTipFromFiles } from './main-stamp.js';
import { TrustedMain, type TrustLog } from './trusted-main.js';
import { matchesHash, Operators, operatorsFile } from './operators.js';
import { REPORT_REFS, reportRef } from '../../core/report/branch.js';
import { git as runGit } from '../git.js';
import { nodeYamls } from '../layout.js';

const REFUSED: AuthResult = { ok: false, status: 401, message: 'mesh: authentication failed: use an operator credential or the node credential from its token' };

/**
 * The Authorizer for the bare repositories in `data`, with git hooks from `hooksDir`; a refused tip
 * of main is told to `log.untrusted`, a line of the operators file that names no operator to `log.ignored`.
 */
export function meshAuthorizer(data: string, hooksDir: string, log: { untrusted?: TrustLog; ignored?: (where: string, why: string) => void } = {}): Authorizer {
  const operators = new Operators(operatorsFile(data), log.ignored);
  const identities = new IdentityCache(data, new TrustedMain(data, log.untrusted));
  const hooks: Array<[string, string]> = [['core.hooksPath', hooksDir]];
  return async ({ user, password, repo }) => {
    if (user === null || password === null || user === '') return REFUSED;
    const operator = operators.check(user, password);
    if (operator === 'ok') return { ok: true, user, role: 'operator', gitConfig: [...hooks, ['receive.maxInputSize', String(MAX_OPERATOR_PUSH)]] };
    if (operator === 'bad' || !NODE_NAME.test(user)) return REFUSED;
    const identity = await identities.get(repo, user);
    const hash = identity?.credential?.sha256;
    if (hash === undefined || !matchesHash(password, hash)) return REFUSED;
    const enrolment: Array<[string, string]> = [['mesh.generation', String(identity!.generation)], ['mesh.enrolments', enrolmentsDir(data, repo)]];
    return { ok: true, user, role: 'node', gitConfig: [...hooks, ...nodeRefs(user), ['receive.maxInputSize', String(MAX_NODE_PUSH)], ...enrolment] };
  };
}

/** The largest pack a node may push: its queued reports, each file at most MAX_REPORT_FILE (hooks.ts). */
export const MAX_NODE_PUSH = 16 * 1024 * 1024;
/** The largest pack an operator may push (the fleet repository's files). */
export const MAX_OPERATOR_PUSH = 1024 * 1024 * 1024;

/** Per-node config: advertise main and the node's own report branch, not the other nodes' (hideRefs: later entries win). */
export function nodeRefs(node: string): Array<[string, string]> {
  return ['uploadpack.hideRefs', 'receive.hideRefs'].flatMap((key): Array<[string, string]> => [
    [key, REPORT_REFS],
    [key, `!${reportRef(node)}`],
  ]);
}

/** The node identities read at the trusted commit of one tip of main. */
interface IdentitiesAtMain {
  main: string;
  /** The newest trusted commit of main when its tip is `main`, where identities are read (null: none trusted). */
  trusted: string | null;
  /** mainStamp() taken before git was asked for `main`; null: ask again at the next request. */
  stamp: string | null;
  nodes: Map<string, NodeIdentity | null>;
  /** node → its node.yaml on main and that file's blob id (null: its name is in two folders), listed at the first lookup. */
  places?: Promise<Map<string, NodeYaml | null>>;
  /**
   * node.yaml files parsed, by blob id, carried over from one commit of main to the next: after
   * a change of main, a node whose node.yaml did not change costs no git process (at 10,000 nodes
   * that was one `git cat-file` per node per change of main). Dropped when no node names it.
   */
  parsed: Map<string, NodeIdentity | null>;
}

/** Where a node's node.yaml is on main, and its blob id. */
interface NodeYaml {
  file: string;
  blob: string;
}

/** Node identities read from the trusted main (HEAD) of each repository, cached per commit of main (itself cached by mainStamp()). */
class IdentityCache {
  private readonly repos = new Map<string, IdentitiesAtMain>();

  constructor(private readonly data: string, private readonly trust: TrustedMain) {}

  async get(repo: string, node: string): Promise<NodeIdentity | null> {
    const dir = join(this.data, repo);
    const cached = await this.atMain(repo, dir);
    if (cached?.trusted == null) return null;
    const trusted = cached.trusted;
    if (!cached.nodes.has(node)) {
      cached.places ??= nodeYamlBlobs(dir, trusted).then((places) => {
        const named = new Set([...places.values()].map((p) => p?.blob));
        for (const blob of cached.parsed.keys()) if (!named.has(blob)) cached.parsed.delete(blob);
        return places;
      });
      const place = (await cached.places).get(node);
      cached.nodes.set(node, place ? await this.parsedIdentity(cached.parsed, dir, node, place) : null);
    }
    return cached.nodes.get(node) ?? null;
  }

  /** The identity of `node` in its node.yaml `place`, parsed once per blob (null: unreadable or naming another node). */
  private async parsedIdentity(parsed: Map<string, NodeIdentity | null>, dir: string, node: string, place: NodeYaml): Promise<NodeIdentity | null> {
    if (!parsed.has(place.blob)) {
      const text = await git(dir, ['cat-file', 'blob', place.blob]);
      if (text === null) return null; // git failed: not kept beyond this commit of main, a later one asks again
      const loaded = loadYaml(text, place.file, NodeIdentity);
      parsed.set(place.blob, loaded.ok ? loaded.value : null);
    }
    const identity = parsed.get(place.blob) ?? null;
    return identity?.node === node ? identity : null;
  }

  /** The identities at main's commit: the last one while the files that hold main are unchanged, else the one git names. */
  private async atMain(repo: string, dir: string): Promise<IdentitiesAtMain | null> {
    const stamp = mainStamp(dir); // taken before git runs, so that a change racing it is seen at the next request
    const cached = this.repos.get(repo);
    if (stamp !== null && cached?.stamp === stamp) return cached;
    // The stamp is not trusted for a moment after main moves, when every host asks at once: main's
    // tip read from its ref files saves a git process per request while it is the commit known.
    const known = cached !== undefined && mainTipFromFiles(dir)?.oid === cached.main;
    const main = known ? cached.main : await git(dir, ['rev-parse', '--verify', '--quiet', 'HEAD^{commit}']);
    if (!main) return null;
    if (cached?.main === main) {
      const entry = { ...cached, stamp };
      this.repos.set(repo, entry);
      return entry;
    }
    const trusted = await this.trust.trusted(repo, main);
    const same = cached !== undefined && cached.trusted === trusted;
    const entry: IdentitiesAtMain = same ? { ...cached, main, stamp } : { main, trusted, stamp, nodes: new Map(), parsed: cached?.parsed ?? new Map() };
    this.repos.set(repo, entry);
    return entry;
  }
}

/** Where each node's node.yaml is at `main`: one listing of nodes/. */
export async function nodePlaces(dir: string, main: string): Promise<Map<string, string | null>> {
  return new Map([...(await nodeYamlBlobs(dir, main))].map(([node, place]) => [node, place?.file ?? null]));
}

/** Where each node's node.yaml is at `main`, with its blob id (null: the name is in two folders): one listing of nodes/. */
async function nodeYamlBlobs(dir: string, main: string): Promise<Map<string, NodeYaml | null>> {
  const blobs = new Map<string, string>();
  for (const entry of (await git(dir, ['ls-tree', '-r', '-z', main, '--', 'nodes/']) ?? '').split('\0')) {
    const tab = entry.indexOf('\t');
    if (tab > 0) blobs.set(entry.slice(tab + 1), entry.slice(0, tab).split(' ')[2]!);
  }
  const places = await nodeYamls(blobs.keys());
  return new Map([...places].map(([node, file]) => [node, file === null || !blobs.has(file) ? null : { file, blob: blobs.get(file)! }]));
}

/** The identity of `node` in its node.yaml `file` at `main` (null: unreadable or naming another node). */
export async function readIdentity(dir: string, main: string, node: string, file: string): Promise<NodeIdentity | null> {
  const text = await git(dir, ['cat-file', 'blob', `${main}:${file}`]);
  if (text === null) return null;
  const loaded = loadYaml(text, file, NodeIdentity);
  return loaded.ok && loaded.value.node === node ? loaded.value : null;
}

/** git's stdout (trimmed for rev-parse), or null when it fails. */
async function git(dir: string, args: string[]): Promise<string | null> {
  try {
    const stdout = await runGit(dir, ['--git-dir', dir, ...args]);
    return args[0] === 'rev-parse' ? stdout.trim() || null : stdout;
  } catch {
    return null;
  }
}
