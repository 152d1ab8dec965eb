/**
 * Paths through the symlinks a declaration makes. mesh never writes through a symlink, so a
 * resource whose path has a declared symlink above it is refused, and named with where it really
 * lands; two resources that land on one file that way are named together. These are checks of
 * the declaration alone, made when it renders (render-with.ts), so `validate`, `plan` and the
 * host say the same.
 */
import { dirname, join, posix } from 'node:path';
import type { Resource } from '../../schema/declaration.js';
import { PATH_TYPES, resourceId } from '../../schema/resource-id.js';

export interface LinkProblem {
  /** The index in `resources` of the resource refused. */
  at: number;
  /** The index of the resource it collides with, when it lands on one's path. */
  other?: number;
  message: (otherPlace: string) => string;
}

/** The problems of `resources` (one per id) with the symlinks they declare. */
export function linkProblems(resources: Resource[]): LinkProblem[] {
  const links = new Map(resources.flatMap((r) => (r.type === 'symlink' && r.ensure !== 'absent' && r.target ? [[r.path, r.target] as const] : [])));
  if (links.size === 0) return [];
  const byPath = new Map(resources.flatMap((r, i) => (PATH_TYPES.has(r.type) && 'path' in r ? [[r.path, i] as const] : [])));
  const problems: LinkProblem[] = [];
  resources.forEach((r, at) => {
    if (!PATH_TYPES.has(r.type) || !('path' in r)) return;
    const through = linkAbove(r.path, links);
    if (!through) return;
    const real = realPath(r.path, links);
    const other = byPath.get(real);
    problems.push(
      other === undefined
        ? { at, message: () => `${r.path} goes through symlink:${through}; mesh never writes through a symlink: declare it as ${real}` }
        : { at, other, message: (place) => `${r.path} collides with ${resourceId(resources[other]!)} (at ${place}) through symlink:${through} (both are ${real})` },
    );
  });
  return problems;
}

/** The nearest declared symlink among the folders above `path`. */
function linkAbove(path: string, links: Map<string, string>): string | undefined {
  for (let p = dirname(path); p !== '/'; p = dirname(p)) if (links.has(p)) return p;
  return undefined;
}

/** Where `path` really lands once the declared symlinks above it are followed. */
function realPath(path: string, links: Map<string, string>): string {
  let p = path;
  for (let hops = 0, link = linkAbove(p, links); link && hops < 40; hops++, link = linkAbove(p, links)) p = throughLink(link, links.get(link)!, p);
  return p;
}

/** Where `path`, under the symlink `link` that points at `target` (absolute, or relative to the link's folder), lands. */
export function throughLink(link: string, target: string, path: string): string {
  return posix.normalize(join(target.startsWith('/') ? target : join(dirname(link), target), path.slice(link.length)));
}
