/**
 * The newest commit of main the server trusts, per repository: the one node identities are read
 * from (mesh-auth.ts). It passes the hosts' own check (core/trust/check.ts): signed by a key
 * trusted at its parent per mesh.yaml's `signers`/`trust:`, and descending from the last trusted
 * main (never backwards, unless a trusted key signed a rollback marker). The walk starts at main's
 * root commit the first time a repository is looked at, and the state after each accepted tip is
 * kept in DATA/.mesh-trust/NAME.json (0600), so later checks start from there. An unsigned or
 * foreign-signed tip, or main forced back to before a revoke, is refused: it changes no
 * credential, and lookups keep answering from the last trusted main. One check runs per new tip
 * of main; the answer is cached by the tip.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { TreeReader } from '../../core/declaration/declaration.js';
import { MeshError } from '../../core/errors.js';
import { treeEntries } from '../../core/git/tree.js';
import { checkTip, fleetTrust, type Ancestry, type TipSource } from '../../core/trust/check.js';
import { TrustState } from '../../core/trust/state.js';
import { catFileBatch, gitBytes, git, type CatFileBatch } from '../git.js';

/** A refused tip, told once to whoever runs the server. */
export type TrustLog = (repo: string, tip: string, code: string, message: string) => void;

/** Where the server keeps what it trusts of the repositories in `data`. */
export function trustDir(data: string): string {
  return join(data, '.mesh-trust');
}

/** The trusted main of each repository in `data`, checked once per new tip. */
export class TrustedMain {
  private readonly repos = new Map<string, { tip: string; trusted: Promise<string | null> }>();
  /** Checks of one repository run one after another, each from the state the last one left. */
  private readonly queues = new Map<string, Promise<unknown>>();

  /** `stateFile` says where a repository's state is kept (default: DATA/.mesh-trust/NAME.json; `mesh-cli hook` keeps it in the repository). */
  constructor(private readonly data: string, private readonly log: TrustLog = () => {}, private readonly now = () => new Date(),
    private readonly stateFile = (repo: string) => join(trustDir(data), repo.replace(/\.git$/, '') + '.json')) {}

  /** The newest trusted commit of `repo`'s main, given that main's tip is now `tip`; null when none is trusted. Rejects when git or the state file fails. */
  trusted(repo: string, tip: string): Promise<string | null> {
    const cached = this.repos.get(repo);
    if (cached?.tip === tip) return cached.trusted;
    const trusted = (this.queues.get(repo) ?? Promise.resolve()).then(() => this.check(repo, tip));
    this.queues.set(repo, trusted.catch(() => {}));
    this.repos.set(repo, { tip, trusted });
    trusted.catch(() => { if (this.repos.get(repo)?.tip === tip) this.repos.delete(repo); }); // asked again at the next request
    return trusted;
  }

  private async check(repo: string, tip: string): Promise<string | null> {
    const dir = join(this.data, repo);
    let batch: CatFileBatch | null = null;
    try {
      const src = gitSource(dir, () => (batch ??= catFileBatch(dir, ['--git-dir', dir])));
      const file = this.stateFile(repo);
      const kept = readState(file);
      const state = kept ?? (await rootState(src, dir, tip, this.now()));
      if (state.anchor?.commit === tip) {
        if (!kept) writeState(file, state);
        return tip;
      }
      const verdict = await checkTip(src, state, tip, this.now());
      if (verdict.ok) {
        writeState(file, verdict.state);
        return tip;
      }
      if (!kept) writeState(file, state);
      this.log(repo, tip, verdict.code, verdict.message);
      return state.anchor?.commit ?? null;
    } finally {
      await (batch as CatFileBatch | null)?.close();
    }
  }
}

/** The trust state at main's root commit: its mesh.yaml's settings (none: `trust: none`), anchored there when the root passes them. */
async function rootState(src: TipSource, dir: string, tip: string, now: Date): Promise<TrustState> {
  const root = (await git(dir, ['--git-dir', dir, 'rev-list', '--first-parent', '--max-parents=0', tip])).trim().split('\n')[0]!;
  const settings = await fleetTrust(src.tree(root));
  const before: TrustState = { format: 1, mode: settings?.mode ?? 'none', signers: settings?.signers ?? [], anchor: null };
  const verdict = await checkTip(src, before, root, now);
  return verdict.ok ? verdict.state : before;
}

/** The bare repository `dir` as the checker reads it, through one `git cat-file --batch` (started at the first read). */
function gitSource(dir: string, batch: () => CatFileBatch): TipSource {
  const object = async (spec: string, type: string) => {
    const [o] = await batch().read([spec]);
    return o && o.type === type ? o.data : null;
  };
  return {
    readCommit: (oid) => object(oid, 'commit'),
    tree: (commit) => treeOf(commit, object),
    descends: (oid, ancestor) => isAncestor(dir, ancestor, oid),
    walkLimit: 100_000, // the first walk may cover main's whole history; the server has all of it
  };
}

/** Files of `commit`, read as objects (`commit:path`). */
function treeOf(commit: string, object: (spec: string, type: string) => Promise<Buffer | null>): TreeReader {
  const entries = async (dir: string) => {
    const data = await object(`${commit}:${dir}`, 'tree');
    return data === null ? null : treeEntries(data, commit.length / 2).map((e) => ({ name: e.name, folder: e.mode === '40000' }));
  };
  return {
    list: async (dir) => (await entries(dir))?.filter((e) => !e.folder).map((e) => e.name) ?? null,
    folders: async (dir) => (await entries(dir))?.filter((e) => e.folder).map((e) => e.name) ?? [],
    read: async (path) => (await object(`${commit}:${path}`, 'blob'))?.toString('utf8') ?? null,
  };
}

async function isAncestor(dir: string, ancestor: string, oid: string): Promise<Ancestry> {
  if (oid === ancestor) return 'yes';
  try {
    await gitBytes(dir, ['--git-dir', dir, 'merge-base', '--is-ancestor', ancestor, oid]);
    return 'yes';
  } catch (e) {
    return (e as { data?: { code?: unknown } }).data?.code === 1 ? 'no' : 'unknown';
  }
}

function readState(file: string): TrustState | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  let parsed: ReturnType<typeof TrustState.safeParse> | null = null;
  try {
    parsed = TrustState.safeParse(JSON.parse(text));
  } catch {
    // not JSON: refused below
  }
  if (parsed?.success) return parsed.data;
  // Refuse to guess: no node is let in until a person looks (moving the file away walks main again from its root).
  throw new MeshError('E_SERVER_TRUST_UNREADABLE', `${file} cannot be read (${parsed ? parsed.error.issues[0]?.message : 'not JSON'}): restore it, or move it away to have the server walk main again from its root commit`);
}

/** Write the state durably: a temporary file, fsync, rename. */
function writeState(file: string, state: TrustState): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, JSON.stringify(state, null, 1) + '\n');
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}
