/**
 * How status reaches origin's report branches: through the git binary (git.ts). `git ls-remote`
 * lists every report tip (over HTTP, one request from this process instead: http-direct.ts);
 * `git fetch` brings the changed tips by id (one or two commits deep, or down to the tip seen
 * before), or, for the tips one commit deep from a `mesh-cli serve`, one request that
 * `git index-pack` takes into the same store (report-pack.ts); one streaming
 * `git cat-file --batch` reads each fetched report commit, its tree, status.json and its signature.
 *
 * The fetched objects go to an object store of their own, `.git/mesh/reports.git`, not to the
 * checkout's: a depth-limited fetch records its shallow commits in the repository it runs in, and
 * the checkout must never become shallow; and 40,000 unreferenced objects a run would be exploded
 * into loose objects by the checkout's own gc. Each fetch runs in a throwaway git dir whose
 * `objects` is that store (so fetches in flight at once keep separate shallow files), with the
 * checkout's configuration included (origin, credentials, proxies). Nothing maintains the store
 * but status: it is emptied when it holds too many packs (it is a cache; what is lost is only
 * the commits a later fetch could name as haves), in generations, so that a run at work in the
 * same checkout keeps what it fetched (status/store-repo.ts).
 *
 * A report file is read only when it is at most MAX_REPORT_FILE bytes (git.ts passes over a
 * larger blob as it streams by): a larger one is never held in memory, and is handed on as
 * a short text saying so (core/report/verify.ts oversizedText), which shows the report as invalid
 * with that reason. A node's branch on `mesh-cli serve` cannot hold one; another server might.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshError, messageOf } from '../../core/errors.js';
import { SIGNATURE_FILE, STATUS_FILE } from '../../core/report/branch.js';
import { commitHeaders } from '../../core/git/commit.js';
import { isFileMode, treeEntries } from '../../core/git/tree.js';
import { oversizedText } from '../../core/report/verify.js';
import { catFileBatch, gitBytes, gitSaid, type BatchObject, type CatFileBatch } from '../git.js';
import { MAX_REPORT_FILE } from '../server/hooks.js';
import { advertisedHeads, direct } from './http-direct.js';
import { reportPackFetch } from './report-pack.js';
import { storeRepo } from './store-repo.js';

/** A git object as status reads it. */
export interface GitObject { type: 'commit' | 'tree' | 'blob' | 'tag'; data: Buffer }

export interface Remote {
  /** Every ref of origin starting with one of `prefixes` → its oid. */
  lsRefs(prefixes: string[]): Promise<Map<string, string>>;
  /**
   * Fetch `wants` (`deepen` commits deep, or down to `haves`) and read each fetched commit with
   * its tree, status.json and signature, by oid.
   */
  fetchObjects(opts: { wants: string[]; haves?: string[]; deepen?: number } & Owners): Promise<Map<string, GitObject>>;
  /** The fetch alone, `deepen` commits deep from each of `wants`, into the store: readObjects reads what it brought, in parts as the caller wants them. */
  fetchTips(opts: { wants: string[]; deepen: number } & Owners): Promise<void>;
  /** The same read, of what the store already holds (nothing fetched): `deepen` commits from each of `wants`. */
  readObjects(opts: { wants: string[]; deepen: number }): Promise<Map<string, GitObject>>;
  /**
   * Where reports are sharded and the caller lets a listing go on without a shard that did not
   * answer: those shards, and the one of them a node's branch lies on, if any (its tip is then unknown).
   */
  unreachable?(): { shards: UnreachableShard[]; of(node: string): UnreachableShard | undefined };
  close(): Promise<void>;
}

/** A report shard that did not answer its listing, and what git said; `fleet`: the fleet server itself (origin), with main and every report on it. */
export interface UnreachableShard {
  url: string;
  error: string;
  fleet?: true;
}

/** The node whose report branch each want comes from (`nodes[i]` for `wants[i]`): where reports are sharded, it says which shard to fetch it from (status/shards.ts). */
export interface Owners {
  nodes?: string[];
}

/**
 * The remote `name` of the checkout at `dir`; `store` is the folder for the fetched objects'
 * repository, `config` the checkout's config file, `format` its object format (sha1, sha256).
 */
export async function openRemote(dir: string, paths: { store: string; config: string }, name = 'origin', store: Promise<Store> = openStore(dir, paths)): Promise<Remote> {
  // The remote's URL as git reaches it (url.*.insteadOf applied), asked for only when git is run
  // for the remote or a failure must say where (one git process less a run on the direct path);
  // '': the checkout has no such remote.
  let urlOfRemote: Promise<string> | null = null;
  const remoteUrl = () => (urlOfRemote ??= /[:/]/.test(name) ? Promise.resolve(name) : gitBytes(dir, ['remote', 'get-url', name]).then((b) => b.toString('utf8').trim(), () => ''));
  const where = async (): Promise<Where> => {
    if (/[:/]/.test(name)) return { text: withoutCredential(name) };
    const url = await remoteUrl();
    return url ? { text: `remote '${name}' (${withoutCredential(url)})` } : { text: `remote '${name}'`, missing: name };
  };
  /** The server refused the credential written in the remote's URL (http-direct.ts: said without git). */
  const refusedInUrl = async () => refused((await where()).text, 'HTTP 401 for the credential in its URL');
  let reader: CatFileBatch | null = null;
  const read = async (specs: string[]) => {
    const { repo } = await store;
    return (reader ??= catFileBatch(dir, [`--git-dir=${repo}`], { maxBlob: MAX_REPORT_FILE })).read(specs);
  };
  const readReports = (commits: string[]) => readReportObjects(commits, read);
  const http = direct(dir, name);
  const byId = reportPackFetch(http, store.then((s) => s.repo));
  /**
   * git in `gitDir` (the checkout's own when null), its failure said as a MeshError. Where the
   * remote's URL carries a password, git is run without credential helpers: it tries that
   * password, and on a refusal it would have the helpers forget the credential they keep for
   * that user and host, which was never tried (as status says a refusal without git where it
   * asks directly: http-direct.ts).
   */
  const remoteGit = async (gitDir: string | null, args: string[], input?: string) => {
    const helpers = passwordIn(await remoteUrl()) ? ['-c', 'credential.helper='] : [];
    return gitBytes(dir, [...(gitDir ? [`--git-dir=${gitDir}`] : []), '-c', 'gc.auto=0', '-c', 'maintenance.auto=false', ...helpers, ...args], input).catch(async (e: unknown) => { throw remoteError(e, await where()); });
  };

  /** `deepen` commits from each of `wants`, one level of parents per read (most reads are of one level). */
  const readDeep = async (wants: string[], deepen: number) => {
    const objects = new Map<string, GitObject>();
    let level = wants;
    for (let d = 0; d < deepen && level.length > 0; d++) {
      for (const [oid, o] of await readReports(level)) objects.set(oid, o);
      if (d + 1 === deepen) break;
      level = [...new Set(level.flatMap((c) => (objects.get(c)?.type === 'commit' ? commitHeaders(objects.get(c)!.data)?.parents ?? [] : [])))].filter((c) => !objects.has(c));
    }
    return objects;
  };

  /**
   * Fetch `wants` into the store in a throwaway git dir (`deepen` commits deep, or down to `had`,
   * commits the store holds, marked shallow so that git does not walk past them); without
   * `deepen`, the commits it brought (rev-list).
   */
  const fetchInto = async (wants: string[], had: string[], deepen: number | undefined): Promise<string[] | null> => {
    const { config, repo } = await store;
    // The tips one commit deep, from a mesh-cli serve in one request (report-pack.ts); git fetch for anything else.
    if (deepen === 1 && had.length === 0) {
      const got = await byId(wants);
      if (got === 'refused') throw await refusedInUrl();
      if (got) return null;
    }
    const lane = mkdtempSync(join(paths.store, 'fetch-'));
    try {
      mkdirSync(join(lane, 'refs'));
      writeFileSync(join(lane, 'HEAD'), 'ref: refs/heads/main\n');
      writeFileSync(join(lane, 'config'), config);
      symlinkSync(join(repo, 'objects'), join(lane, 'objects'));
      if (had.length) writeFileSync(join(lane, 'shallow'), had.join('\n') + '\n');
      await remoteGit(lane, ['fetch', '--quiet', '--no-write-fetch-head', '--no-tags', '--no-auto-maintenance', '--no-write-commit-graph', '--no-recurse-submodules',
        ...(deepen === undefined ? [] : [`--depth=${deepen}`]), ...had.map((h) => `--negotiation-tip=${h}`), '--stdin', name], wants.join('\n') + '\n');
      if (deepen !== undefined) return null;
      return (await remoteGit(lane, ['rev-list', '--stdin'], [...wants, ...had.map((h) => `^${h}`)].join('\n') + '\n')).toString('latin1').split('\n').filter(Boolean);
    } finally {
      rmSync(lane, { recursive: true, force: true });
    }
  };

  return {
    async lsRefs(prefixes) {
      // One request from here where it reaches the server as git would (http-direct.ts); else `git ls-remote`, in the checkout (the store's configuration is the checkout's, included).
      const advertised = await advertisedHeads(http);
      if (advertised === 'refused') throw await refusedInUrl();
      const heads = advertised ?? lsRemoteHeads(await remoteGit(null, ['ls-remote', '--heads', name]));
      return new Map([...heads].filter(([ref]) => prefixes.some((p) => ref.startsWith(p))));
    },
    async fetchObjects({ wants, haves = [], deepen }) {
      if (wants.length === 0) return new Map();
      // A have must be in the store, and is marked shallow, so that git does not walk past it.
      const had = haves.length ? (await read(haves)).flatMap((o) => (o?.type === 'commit' ? [o.oid] : [])) : [];
      const commits = await fetchInto(wants, had, deepen);
      return deepen !== undefined ? readDeep(wants, deepen) : readReports(commits!);
    },
    async fetchTips({ wants, deepen }) {
      if (wants.length > 0) await fetchInto(wants, [], deepen);
    },
    readObjects: ({ wants, deepen }) => readDeep(wants, deepen),
    async close() {
      await reader?.close();
    },
  };
}

/** `git ls-remote --heads` output as ref → id. */
function lsRemoteHeads(out: Buffer): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of out.toString('utf8').split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) refs.set(line.slice(tab + 1), line.slice(0, tab));
  }
  return refs;
}

/** The report store as one run uses it: its repository (the generation it took: store-repo.ts) and that repository's configuration. */
export interface Store {
  repo: string;
  config: string;
}

/**
 * The report store of the checkout at `dir` (made or emptied as needed), shared by every Remote
 * that fetches into it: made once the checkout's object format is known, so that listing refs
 * does not wait for it (`objectFormat`, when the caller knows it: openFleet asked git). `name` in
 * openRemote may then be a remote or a URL.
 */
export function openStore(dir: string, paths: { store: string; config: string }, objectFormat?: string): Promise<Store> {
  const format = objectFormat ? Promise.resolve(objectFormat) : gitBytes(dir, ['rev-parse', '--show-object-format']).then((b) => b.toString('utf8').trim(), () => 'sha1');
  const store = format.then((format) => {
    const config = `[include]\n\tpath = ${paths.config}\n[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectFormat = ${format}\n`;
    return { repo: storeRepo(paths.store, config), config };
  });
  store.catch(() => undefined); // awaited by every read and fetch
  return store;
}

/**
 * Each of `commits` read with its tree, status.json and signature, by id: the commits, then their
 * trees, then the two files (reading by id costs git half of what `commit:path` specs do, which
 * make it parse each commit and tree once per path). A report file over MAX_REPORT_FILE is never
 * held in memory: it becomes a short text that says so, under the file's own id.
 */
async function readReportObjects(commits: string[], read: (specs: string[]) => Promise<Array<BatchObject | null>>): Promise<Map<string, GitObject>> {
  const objects = new Map<string, GitObject>();
  const got = async (oids: string[], as: 'commit' | 'tree' | 'blob', names?: Map<string, string>) => {
    for (const o of await read([...new Set(oids)])) {
      if (!o || o.type !== as) continue;
      const data = o.oversized ? Buffer.from(oversizedText(names?.get(o.oid) ?? 'a report file', o.size, MAX_REPORT_FILE)) : o.data;
      objects.set(o.oid, { type: as, data });
    }
  };
  await got(commits, 'commit');
  const trees = commits.flatMap((c) => {
    const commit = objects.get(c);
    const tree = commit?.type === 'commit' ? commitHeaders(commit.data)?.tree : undefined;
    return tree ? [tree] : [];
  });
  await got(trees, 'tree');
  const files = new Map<string, string>();
  for (const tree of trees) {
    const o = objects.get(tree);
    if (o?.type !== 'tree') continue;
    for (const e of treeEntries(o.data, tree.length / 2)) if ((e.name === STATUS_FILE || e.name === SIGNATURE_FILE) && isFileMode(e.mode)) files.set(e.oid, e.name);
  }
  await got([...files.keys()], 'blob', files);
  return objects;
}

/** Whether `url` has a password written in it. */
function passwordIn(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    return false; // not a URL git reaches over HTTP (a path, scp-like ssh): no password in it
  }
}

function withoutCredential(url: string): string {
  return url.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s']*@/gi, '$1');
}

/** The server at `where` refused the operator credential (`said`: how it said so). */
function refused(where: string, said: string, cause?: unknown): MeshError {
  return new MeshError('E_AUTH', `${where} refused the operator credential: it is wrong or missing (${said}); `
    + `put the operator credential in the remote's URL (git remote set-url with http://operator:SECRET@host/...) or in a git credential helper`, { cause });
}

/** Where a fetch went, as a failure names it: the remote and its URL; `missing`, the remote's name when the checkout has no such remote. */
interface Where {
  text: string;
  missing?: string;
}

/** git's failure to reach the remote, as a MeshError that says what to do (never with the credential). */
function remoteError(e: unknown, { text: where, missing }: Where): MeshError {
  if (missing !== undefined) {
    return new MeshError('E_NO_REMOTE', `this checkout has no remote '${missing}': add the fleet server's repository with 'git remote add ${missing} http://HOST:PORT/fleet.git' (the operator credential in the URL or a git credential helper)`, { cause: e });
  }
  const stderr = String((e as MeshError).data?.stderr ?? messageOf(e));
  const said = withoutCredential(gitSaid(stderr));
  if (/Authentication failed|could not read (Username|Password)|terminal prompts disabled|HTTP (401|403)|returned error: 40[13]/.test(stderr)) return refused(where, said, e);
  return new MeshError('E_FETCH', `cannot fetch from ${where}: ${said}; check that the fleet server is running`, { next: 'retry', cause: e });
}
