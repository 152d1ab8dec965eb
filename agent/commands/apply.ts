/**
 * `mesh-host apply --bundle DIR`: one pass from a local folder of declaration files, with
 * no git and no report. Used by the first node, by people trying a declaration, and by the
 * benchmark. Roles named in `include` are read from DIR/roles/. It holds the root's lock for
 * the pass, so it never runs beside another mesh-host on the same root. With `--noop` it says
 * what it would do and changes nothing (preview.ts).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { withDeclarationCache } from '../declaration-cache.js';
import { loadDeclarationWith, nodeDir, type LoadOptions, type TreeReader } from '../../core/declaration/declaration.js';
import { MeshError, placed } from '../../core/errors.js';
import { acquireLock } from '../lock.js';
import { hostPaths } from '../paths.js';
import { applyDeclaration } from '../apply-declaration.js';
import { collectFacts } from '../facts.js';
import { placeOfDir } from '../../core/fleet/layout.js';
import type { ReportBody } from '../report.js';
import { previewDeclaration, type Preview } from '../preview.js';
import { passContext, type HostContext, type ResourceContext } from '../resources/handler.js';
import { Store } from '../store/core.js';

/** Apply the declaration in folder `bundle` to the machine at `host.root`. */
export async function applyBundle(bundle: string, host: HostContext): Promise<ReportBody> {
  return withBundle(bundle, host, async ({ node, store, ctx, tree, opts, named }) => {
    const body = await applyDeclaration({ config: { node }, store, ctx }, withDeclarationCache(tree, join(hostPaths(host.root).stateDir, 'bundle-cache.json')), null, opts);
    if (store.journaled()) store.save('pass'); // fold this pass's records into the snapshot; a no-op pass writes nothing
    return { ...body, errors: body.errors.map(named) };
  });
}

/** `apply --bundle DIR --noop`: what applying the bundle would do here, changing nothing (no cache, no store write). */
export async function previewBundle(bundle: string, host: HostContext): Promise<Preview> {
  return withBundle(bundle, host, async ({ node, store, ctx, tree, opts, named }) => {
    const loaded = await loadDeclarationWith(tree, node, opts, ctx.load.parser);
    if (!loaded.ok) return { lines: [], inSync: 0, problems: loaded.problems.map(named).map((p) => ({ message: placed(p) })) };
    return previewDeclaration(tree, node, opts, loaded.declaration, store, ctx);
  });
}

interface Bundle {
  node: string;
  store: Store;
  ctx: ResourceContext;
  tree: TreeReader;
  opts: LoadOptions;
  /** A problem named by the file the person wrote (b/base.yaml), not the fleet path it stands for (nodes/<node>/base.yaml). */
  named: <P extends { file?: string; message: string }>(p: P) => P;
}

/** Run `work` on the bundle in folder `bundle` with the root's lock held: the node it applies as, its store, and the folder as a tree. */
async function withBundle<T>(bundle: string, host: HostContext, work: (b: Bundle) => Promise<T>): Promise<T> {
  const dir = resolve(bundle);
  if (!existsSync(dir)) throw new MeshError('E_NO_BUNDLE', `bundle folder ${bundle} does not exist`);
  if (!statSync(dir).isDirectory()) throw new MeshError('E_NO_BUNDLE', `--bundle ${bundle} is a file: name the folder that holds the declaration files (${dirname(bundle)}, if it is one of them)`);
  const paths = hostPaths(host.root);
  // An enrolled machine applies as its node; the config (and its schemas) is read only when there is one.
  const config = existsSync(paths.config) ? (await host.load.readConfig())(paths) : null;
  const node = config?.node ?? 'bundle';
  const release = acquireLock(paths);
  try {
    const ctx = passContext(host, config?.hostPackage ?? 'mesh-host');
    const store = await Store.openLoading(paths.store, host.load.storeChecks, ctx.faults);
    if (ctx.debug) store.debug = ctx.debug;
    const asDir = nodeDir(node);
    const renamed = (text: string) => text.replaceAll(`${asDir}/`, `${bundleFile(bundle, asDir, asDir)}/`);
    const named = <P extends { file?: string; message: string }>(p: P): P => (p.file ? { ...p, file: bundleFile(bundle, asDir, p.file), message: renamed(p.message) } : p);
    // The bundle is the node's own folder: no groups above it, and its facts are this machine's.
    const opts: LoadOptions = { facts: collectFacts(host.root), place: placeOfDir(asDir) };
    return await work({ node, store, ctx, tree: folderTree(dir, asDir), opts, named });
  } finally {
    release();
  }
}

/** Where `file` (a path in the fleet's tree, as the loader names it) is in the bundle folder as the person named it. */
function bundleFile(bundle: string, asDir: string, file: string): string {
  return join(bundle, file === asDir ? '.' : file.startsWith(asDir + '/') ? file.slice(asDir.length + 1) : file);
}

/** A TreeReader over a plain folder that stands for `nodes/<node>/` (roles under DIR/roles/). */
export function folderTree(dir: string, asDir: string): TreeReader {
  const real = (path: string) => join(dir, path === asDir ? '.' : path.startsWith(asDir + '/') ? path.slice(asDir.length + 1) : path);
  return {
    async list(path) {
      const p = real(path);
      return existsSync(p) ? readdirSync(p, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name) : null;
    },
    async folders(path) {
      const p = real(path);
      return existsSync(p) ? readdirSync(p, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name) : [];
    },
    async read(path) {
      const p = real(path);
      return existsSync(p) ? readFileSync(p, 'utf8') : null;
    },
  };
}
