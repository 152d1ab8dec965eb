/**
 * A resource's identity, apart from the schemas: code that only needs ids (the host's apply
 * path) then does not build every schema at start-up. Import it from here.
 */
import type { Resource } from './declaration.js';

/** The types whose resources are named by `path` (every other type by `name`). */
export const PATH_TYPES: ReadonlySet<string> = new Set(['file', 'directory', 'symlink']);

/** The stable identity of a resource: its type and its path or name, e.g. `file:/etc/motd`, `command:reload-app`. */
export function resourceId(r: Resource): string {
  return `${r.type}:${'path' in r ? r.path : r.name}`;
}
