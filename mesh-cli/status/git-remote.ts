/**
 * How status reaches origin's report branches: through the git binary (git.ts). `git ls-remote`
 * lists every report tip; `git fetch` brings the changed tips by id (one or two commits deep, or
 * down to the tip seen before); one streaming `git cat-file --batch` reads each fetched report
 * commit, its tree, status.json and its signature.
 *
 * The fetched objects go to an object store of their own, `.git/mesh/reports.git`, not to the
 * checkout's: a depth-limited fetch records its shallow commits in the repository it runs in, and
 * the checkout must never become shallow; and 40,000 unreferenced objects a run would be exploded
 * into loose objects by the checkout's own gc. Each fetch runs in a throwaway git dir whose
 * `objects` is that store (so fetches in flight at once keep separate shallow files), with the
 * checkout's configuration included (origin, credentials, proxies). Nothing maintains the store
 * but this file: it is emptied when it holds too many packs (it is a cache; what is lost is only
 * the commits a later fetch could name as haves).
 *
 * A report file is read only when it is at most MAX_REPORT_FILE bytes (its size is asked first,
 * with `git cat-file --batch-check`): a larger one is never read into memory, and is handed on as
 * a short text saying so (core/report/verify.ts oversizedText), which shows the report as invalid
 * with that reason. A node's branch on `mesh-cli serve` cannot hold one; another server might.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshError, messageOf } from '../../core/errors.js';
import { SIGNATURE_FILE, STATUS_FILE } from '../../core/report/branch.js';
import { commitHeaders } from '../../core/git/commit.js';
import { oversizedText } from '../../core/report/verify.js';
import { catFileBatch, gitBytes, type BatchObject, type CatFileBatch } from '../git.js';
import { MAX_REPORT_FILE } from '../server/hooks.js';

/** A git object as status reads it. */
export interface GitObject { type: 'commit' | 'tree' | 'blob' | 'tag'; data: Buffer }

export interface Remote {
  /** Every ref of origin starting with one of `prefixes` → its oid. */
  lsRefs(prefixes: string[]): Promise<Map<string, string>>;
  /**
   * Fetch `wants` (`deepen` commits deep, or down to `haves`) and read each fetched commit with
   * its tree, status.json and signature, by oid.
   */
  fetchObjects(opts: { wants: string[]; haves?: string[]; deepen?: number }): Promise<Map<string, GitObject>>;
  /** The same read, of what the store already holds (nothing fetched): `deepen` commits from each of `wants`. */
  readObjects(opts: { wants: string[]; deepen: number }): Promise<Map<string, GitObject>>;
  close(): Promise<void>;
}

/** Packs the store may hold before it is emptied at the start of a run. */
const MAX_PACKS = 40;

/**
 * The remote `name` of the checkout at `dir`; `store` is the folder for the fetched objects'
 * repository, `config` the checkout's config file, `format` its object format (sha1, sha256).
 */
export async function openRemote(dir: string, paths: { store: string; config: string }, name = 'origin'): Promise<Remote> {
  const [url, format] = await Promise.all([
    gitBytes(dir, ['remote', 'get-url', name]).then((b) => b.toString('utf8').trim(), () => ''),
    gitBytes(dir, ['rev-parse', '--show-object-format']).then((b) => b.toString('utf8').trim(), () => 'sha1'),
  ]);
  const where = `remote '${name}' (${withoutCredential(url)})`;
  const repo = join(paths.store, 'reports.git');
  const objects = join(repo, 'objects');
  const config = `[include]\n\tpath = ${paths.config}\n[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectFormat = ${format}\n`;
  prepareStore(repo, config);
  let reader: CatFileBatch | null = null;
  let sizer: CatFileBatch | null = null;
  const read = (specs: string[]) => readCapped(specs, (s) => (reader ??= catFileBatch(dir, [`--git-dir=${repo}`])).read(s), (s) => (sizer ??= catFileBatch(dir, [`--git-dir=${repo}`], true)).read(s));
  const remoteGit = (gitDir: string, args: string[], input?: string) =>
    gitBytes(dir, [`--git-dir=${gitDir}`, '-c', 'gc.auto=0', '-c', 'maintenance.auto=false', ...args], input).catch((e: unknown) => { throw remoteError(e, where); });

  /** `deepen` commits from each of `wants`, one level of parents per read (most reads are of one level). */
  const readDeep = async (wants: string[], deepen: number) => {
    const objects = new Map<string, GitObject>();
    let level = wants;
    for (let d = 0; d < deepen && level.length > 0; d++) {
      for (const [oid, o] of toMap(await read(level.flatMap(reportSpecs)))) objects.set(oid, o);
      if (d + 1 === deepen) break;
      level = [...new Set(level.flatMap((c) => (objects.get(c)?.type === 'commit' ? commitHeaders(objects.get(c)!.data)?.parents ?? [] : [])))].filter((c) => !objects.has(c));
    }
    return objects;
  };

  return {
    async lsRefs(prefixes) {
      const out = (await remoteGit(repo, ['ls-remote', '--heads', name])).toString('utf8');
      const refs = new Map<string, string>();
      for (const line of out.split('\n')) {
        const tab = line.indexOf('\t');
        const ref = line.slice(tab + 1);
        if (tab > 0 && prefixes.some((p) => ref.startsWith(p))) refs.set(ref, line.slice(0, tab));
      }
      return refs;
    },
    async fetchObjects({ wants, haves = [], deepen }) {
      if (wants.length === 0) return new Map();
      // A have must be in the store, and is marked shallow, so that git does not walk past it.
      const had = haves.length ? (await read(haves)).flatMap((o) => (o?.type === 'commit' ? [o.oid] : [])) : [];
      const lane = mkdtempSync(join(paths.store, 'fetch-'));
      try {
        mkdirSync(join(lane, 'refs'));
        writeFileSync(join(lane, 'HEAD'), 'ref: refs/heads/main\n');
        writeFileSync(join(lane, 'config'), config);
        symlinkSync(objects, join(lane, 'objects'));
        if (had.length) writeFileSync(join(lane, 'shallow'), had.join('\n') + '\n');
        await remoteGit(lane, ['fetch', '--quiet', '--no-write-fetch-head', '--no-tags', '--no-auto-maintenance', '--no-write-commit-graph', '--no-recurse-submodules',
          ...(deepen === undefined ? [] : [`--depth=${deepen}`]), ...had.map((h) => `--negotiation-tip=${h}`), '--stdin', name], wants.join('\n') + '\n');
        if (deepen !== undefined) return readDeep(wants, deepen);
        const commits = (await remoteGit(lane, ['rev-list', '--stdin'], [...wants, ...had.map((h) => `^${h}`)].join('\n') + '\n')).toString('latin1').split('\n').filter(Boolean);
        return toMap(await read(commits.flatMap(reportSpecs)));
      } finally {
        rmSync(lane, { recursive: true, force: true });
      }
    },
    readObjects: ({ wants, deepen }) => readDeep(wants, deepen),
    async close() {
      await Promise.all([reader?.close(), sizer?.close()]);
    },
  };
}

/**
 * Read `specs`, a report file (a `commit:path` spec) only when its size is within MAX_REPORT_FILE;
 * one over it becomes a short text that says so, under the file's own id.
 */
async function readCapped(specs: string[], read: (specs: string[]) => Promise<Array<BatchObject | null>>, check: (specs: string[]) => Promise<Array<{ oid: string; size: number } | null>>): Promise<Array<BatchObject | null>> {
  const files = specs.filter((s) => s.includes(':'));
  const sizes = new Map(files.map((s, i) => [s, i]));
  const checked = files.length ? await check(files) : [];
  const over = (s: string) => { const c = sizes.has(s) ? checked[sizes.get(s)!] : null; return c && c.size > MAX_REPORT_FILE ? c : null; };
  const got = await read(specs.filter((s) => !over(s)));
  let at = 0;
  return specs.map((s) => {
    const big = over(s);
    if (!big) return got[at++] ?? null;
    const data = Buffer.from(oversizedText(s.slice(s.indexOf(':') + 1), big.size, MAX_REPORT_FILE));
    return { oid: big.oid, type: 'blob', size: data.length, data };
  });
}

/** What is read of a report commit: itself, its tree, status.json and its signature. */
function reportSpecs(commit: string): string[] {
  return [commit, `${commit}^{tree}`, `${commit}:${STATUS_FILE}`, `${commit}:${SIGNATURE_FILE}`];
}

function toMap(objects: Array<{ oid: string; type: string; data: Buffer } | null>): Map<string, GitObject> {
  const out = new Map<string, GitObject>();
  for (const o of objects) if (o) out.set(o.oid, { type: o.type as GitObject['type'], data: o.data });
  return out;
}

/** The store's repository, made when missing and emptied when it holds more than MAX_PACKS packs. */
function prepareStore(repo: string, config: string): void {
  let packs = Infinity;
  try {
    packs = readdirSync(join(repo, 'objects', 'pack')).filter((f) => f.endsWith('.pack')).length;
  } catch {
    // not made yet
  }
  if (packs <= MAX_PACKS) return writeFileSync(join(repo, 'config'), config);
  rmSync(repo, { recursive: true, force: true });
  mkdirSync(join(repo, 'objects', 'pack'), { recursive: true });
  mkdirSync(join(repo, 'objects', 'info'));
  mkdirSync(join(repo, 'refs'));
  writeFileSync(join(repo, 'HEAD'), 'ref: refs/heads/main\n');
  writeFileSync(join(repo, 'config'), config);
}

function withoutCredential(url: string): string {
  return url.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s']*@/gi, '$1');
}

/** git's failure to reach the remote, as a MeshError that says what to do (never with the credential). */
function remoteError(e: unknown, where: string): MeshError {
  const stderr = String((e as MeshError).data?.stderr ?? messageOf(e));
  const said = withoutCredential(stderr.split('\n').filter(Boolean).at(-1) ?? '').replace(/^fatal: /, '');
  if (/Authentication failed|could not read (Username|Password)|terminal prompts disabled|HTTP (401|403)|returned error: 40[13]/.test(stderr)) {
    return new MeshError('E_AUTH', `${where} refused the operator credential: it is wrong or missing (${said}); `
      + `put the operator credential in the remote's URL (git remote set-url with http://operator:SECRET@host/...) or in a git credential helper`, { cause: e });
  }
  return new MeshError('E_FETCH', `cannot fetch from ${where}: ${said}; check that the fleet server is running`, { next: 'retry', cause: e });
}
