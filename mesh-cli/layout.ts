/**
 * Where the nodes sit, as mesh-cli asks: core's layout (core/fleet/layout.ts) read from a list of
 * file paths (a `git ls-tree -r --name-only` of nodes/ on main) or from any FolderReader (the
 * checkout, a commit). A node is found wherever it sits under nodes/; a node name in two folders
 * is never guessed at: the commands that write refuse it naming both, the readers treat it as
 * having no identity, and `validate` says why.
 */
import { MeshError } from '../core/errors.js';
import { readLayout, type FleetLayout, type FolderReader, type NodePlace } from '../core/fleet/layout.js';

/** A FolderReader over repo-relative file paths, indexed once (a listing of 2,000 nodes is read in one go, not once per folder). */
export function pathsReader(paths: Iterable<string>): FolderReader {
  const files = new Map<string, Set<string>>();
  const folders = new Map<string, Set<string>>();
  const add = (index: Map<string, Set<string>>, dir: string, name: string) => {
    let names = index.get(dir);
    if (!names) index.set(dir, (names = new Set()));
    names.add(name);
  };
  for (const path of paths) {
    const parts = path.split('/');
    for (let i = 0; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      add(i === parts.length - 1 ? files : folders, dir, parts[i]!);
    }
  }
  // A folder holding only folders exists too: list() is null only for what is not there at all.
  return {
    async list(dir) {
      return files.has(dir) ? [...files.get(dir)!].sort() : folders.has(dir) ? [] : null;
    },
    async folders(dir) {
      return [...(folders.get(dir) ?? [])].sort();
    },
  };
}

/** Every folder of a node name that sits in more than one folder of `layout`: name → its folders, in tree order. */
export function duplicateNodes(layout: FleetLayout): Map<string, string[]> {
  const dirs = new Map<string, string[]>();
  for (const p of layout.problems) {
    if (!p.file.endsWith('/node.yaml')) continue;
    const dir = p.file.slice(0, -'/node.yaml'.length);
    const place = layout.nodes.get(dir.slice(dir.lastIndexOf('/') + 1));
    if (!place || place.dir === dir) continue;
    dirs.set(place.node, [...(dirs.get(place.node) ?? [place.dir]), dir]);
  }
  return dirs;
}

/** Each node's node.yaml among `paths` (e.g. `nodes/web/web-1/node.yaml`); a node whose name sits in two folders maps to null. */
export async function nodeYamls(paths: Iterable<string>): Promise<Map<string, string | null>> {
  const layout = await readLayout(pathsReader(paths));
  const twice = duplicateNodes(layout);
  return new Map([...layout.nodes].map(([node, place]) => [node, twice.has(node) ? null : `${place.dir}/node.yaml`]));
}

/** Where `node` sits in `tree`, or null when it is not there; an error naming both folders when its name is in two. */
export async function placeOfNode(tree: FolderReader, node: string): Promise<NodePlace | null> {
  const layout = await readLayout(tree);
  const twice = duplicateNodes(layout).get(node);
  if (twice) throw new MeshError('E_DUPLICATE_NODE', `node ${node} is in ${twice.map((d) => `${d}/`).join(' and ')}: node names are unique across nodes/ (its report branch is reports/${node}); remove or rename all but one (git rm -r / git mv), then run this again`);
  return layout.nodes.get(node) ?? null;
}

/**
 * What a command says of `node` when the fleet has no such node: the node it likely meant when
 * only the case differs (node names are lower case), else the nodes there are (the first dozen).
 */
export function notANode(node: string, known: Iterable<string>, code = 'E_UNKNOWN_NODE'): MeshError {
  const names = [...known].sort();
  const meant = names.find((n) => n === node.toLowerCase());
  const listed = names.length > 12 ? `${names.slice(0, 12).join(', ')} and ${names.length - 12} more ('mesh-cli status' lists them)` : names.join(', ');
  const which = meant ? `: did you mean ${meant}? (node names are lower case)` : names.length ? `; the nodes are: ${listed}` : '; the fleet has no node yet';
  return new MeshError(code, `there is no node ${node} under nodes/ (a folder holding node.yaml)${which}`, { data: { node } });
}
