/**
 * What the three filesystem handlers (file, directory, symlink) share: reading the node at the
 * declared path, the differences of presence and kind that come before their own, the parent
 * folder that must exist before they write (and is made first when it is declared), and restoring
 * what was there on removal.
 */
import type { DirectoryResource, FileResource, SymlinkResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { underRoot } from '../paths.js';
import type { Handler, Need, ResourceContext } from './handler.js';
import { ownershipDiff, readNode, restoreNode, type NodeState } from './node.js';

type NodeResource = FileResource | DirectoryResource | SymlinkResource;

interface NodeParts<R extends NodeResource> {
  /** Whether `read` includes a file's content (to compare it). */
  withContent: boolean;
  /** Whether `apply` stages its write (Handler.staged). */
  staged?: boolean;
  /** What `r` should be, as in "absent, should be a file". */
  should(r: R): string;
  /** The differences once the node is there and of the declared kind. */
  diff(r: R, now: NodeState): string[];
  /** Change the machine so that `r` holds; `now` is what was read, `real` where the path is under the root. */
  apply(r: R, now: NodeState | null, real: string, ctx: ResourceContext): Promise<void>;
  prior: Handler<R>['prior'];
  needs?: Handler<R>['needs'];
  /** What else `read` observes of the node `now` (at `real`), beside its kind, mode and owners. */
  observe?(r: R, now: NodeState, real: string, ctx: ResourceContext): Partial<NodeState>;
}

/** A handler for a filesystem node of kind `kind`, from the parts that are its own. */
export function nodeHandler<R extends NodeResource>(kind: NodeState['kind'], parts: NodeParts<R>): Handler<R> {
  return {
    needs: (r) => [...parentNeeds(r.path), ...(parts.needs?.(r) ?? [])],
    ...(parts.staged ? { staged: true } : {}),
    async read(r, ctx) {
      const now = readNode(ctx, r.path, parts.withContent);
      return now && parts.observe ? { ...now, ...parts.observe(r, now, underRoot(ctx.root, r.path), ctx) } : now;
    },
    diff(r, observed) {
      const now = observed as NodeState | null;
      if (r.ensure === 'absent') return now ? [`${now.kind} exists, should be absent`] : [];
      if (!now) return [`absent, should be ${parts.should(r)}`];
      if (now.kind !== kind) return [`is a ${now.kind}, should be ${parts.should(r)}`];
      return parts.diff(r, now);
    },
    async apply(r, observed, ctx) {
      return parts.apply(r, observed as NodeState | null, underRoot(ctx.root, r.path), ctx);
    },
    prior: parts.prior,
    async remove(record, ctx) {
      return restoreNode(ctx, record);
    },
  };
}

/**
 * A path needs the directory it is in, when that is declared too: the pass makes it first wherever
 * it is declared (preflight.ts dependencyOrder), as Puppet autorequires a file's parent. The
 * directory's own parent is its need in turn.
 */
function parentNeeds(path: string): Need[] {
  const parent = path.slice(0, path.lastIndexOf('/'));
  return parent ? [{ id: `directory:${parent}`, field: 'path' }] : [];
}

/** Refuse to write `path` when its parent folder is not a directory. */
export function assertParent(ctx: ResourceContext, path: string): void {
  const parent = readNode(ctx, path.slice(0, path.lastIndexOf('/')) || '/', false);
  if (parent?.kind !== 'directory') {
    throw new MeshError('E_NO_PARENT', `the parent directory of ${path} does not exist: declare it as a directory resource`);
  }
}

/** A file or directory needs the user and group it is owned by. */
export function ownerNeeds(r: { owner?: string; group?: string }): Array<{ id: string; field: string }> {
  return [...(r.owner ? [{ id: `user:${r.owner}`, field: 'owner' }] : []), ...(r.group ? [{ id: `group:${r.group}`, field: 'group' }] : [])];
}

/** Differences in mode (when declared), owner and group. */
export function attributeDiff(r: { mode?: string; owner?: string; group?: string }, now: NodeState): string[] {
  return [...(r.mode !== undefined && now.mode !== normalMode(r.mode) ? [`mode ${now.mode} → ${normalMode(r.mode)}`] : []), ...ownershipDiff(r, now)];
}

/** "644" and "0644" are the same mode. */
export function normalMode(mode: string): string {
  return mode.length === 3 ? '0' + mode : mode;
}
