/**
 * Where each node sits in the fleet repo. A folder under nodes/ that holds node.yaml is a node;
 * every other folder is a group, and groups nest. A node's levels are nodes/, then each group
 * folder down to its own: its declaration files, variables and secrets are read in that order,
 * outermost first. Node names are the leaf folder names and are unique across the whole tree
 * (a node's report branch is reports/<node>); a node holds no groups or nodes.
 */
import type { Problem } from '../errors.js';
import { NODE_NAME } from '../../schema/node-name.js';

/** The folders of one fleet commit (a git tree, a checkout, or files in memory). */
export interface FolderReader {
  /** Names of the files directly in `dir`; null when `dir` does not exist. */
  list(dir: string): Promise<string[] | null>;
  /** Names of the folders directly in `dir`; empty when there are none. */
  folders(dir: string): Promise<string[]>;
}

export const NODES = 'nodes';

export interface NodePlace {
  node: string;
  /** The node's folder, e.g. nodes/web/eu/web-1. */
  dir: string;
  /** The group paths above it under nodes/, outermost first, e.g. ['web', 'web/eu']. */
  groups: string[];
}

export interface FleetLayout {
  nodes: Map<string, NodePlace>;
  /** Every group path under nodes/, in tree order. */
  groups: string[];
  problems: Problem[];
}

/** Files of a level (nodes/, a group, a node) that hold no resources: identity, variables, secrets. */
export const NOT_DECLARATIONS = new Set(['node.yaml', 'vars.yaml', 'secrets.yaml']);

/** Groups may nest this deep; deeper is almost certainly a mistake (and keeps a walk bounded). */
export const MAX_GROUP_DEPTH = 8;

/** Every node and group under nodes/, with the problems of the layout itself. */
export async function readLayout(tree: FolderReader): Promise<FleetLayout> {
  const layout: FleetLayout = { nodes: new Map(), groups: [], problems: [] };
  await walk(tree, NODES, [], layout);
  return layout;
}

/** The folders whose files make up `place`'s declaration and variables, outermost first: nodes/, its groups, its own. */
export function levelsOf(place: NodePlace): string[] {
  return [NODES, ...place.groups.map((g) => `${NODES}/${g}`), place.dir];
}

/** The place of the node folder `dir` (e.g. nodes/web/eu/web-1): its name and the groups above it. */
export function placeOfDir(dir: string): NodePlace {
  const parts = dir.split('/').slice(1); // without nodes/
  const groups = parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
  return { node: parts[parts.length - 1]!, dir, groups };
}

/**
 * Where `node` sits, reading as little as it can: the folder `hint` (where it was last time)
 * when it still holds node.yaml, otherwise a walk of the group folders that stops at the node.
 * It does not look for a second node of the same name (`validate` does, over the whole tree).
 */
export async function findNode(tree: FolderReader, node: string, hint?: string): Promise<NodePlace | null> {
  if (hint && hint.startsWith(`${NODES}/`) && hint.endsWith(`/${node}`) && (await tree.list(hint))?.includes('node.yaml')) return placeOfDir(hint);
  let level = [NODES];
  for (let depth = 0; level.length > 0 && depth <= MAX_GROUP_DEPTH; depth++) {
    const next: string[] = [];
    for (const dir of level) {
      for (const f of await tree.folders(dir)) {
        const child = `${dir}/${f}`;
        const files = await tree.list(child);
        if (files?.includes('node.yaml')) {
          if (f === node) return placeOfDir(child);
        } else next.push(child);
      }
    }
    level = next;
  }
  return null;
}

async function walk(tree: FolderReader, dir: string, groups: string[], layout: FleetLayout): Promise<void> {
  const [files, folders] = await Promise.all([tree.list(dir), tree.folders(dir)]);
  const name = dir.slice(dir.lastIndexOf('/') + 1);
  if (dir !== NODES && files?.includes('node.yaml')) {
    const place = { node: name, dir, groups };
    const first = layout.nodes.get(name);
    if (first) layout.problems.push(at(`${dir}/node.yaml`, `node ${name} is also at ${first.dir}/: node names are unique across nodes/ (its report branch is reports/${name}); rename or remove one`));
    else layout.nodes.set(name, place);
    for (const f of folders) layout.problems.push(at(`${dir}/${f}`, `${dir}/ is a node (it holds node.yaml), so it cannot hold the folder ${f}/: move groups and nodes out of node folders`));
    return;
  }
  if (dir !== NODES) {
    const path = dir.slice(NODES.length + 1);
    if (!NODE_NAME.test(name)) layout.problems.push(at(dir, `group folder '${name}' must be lower-case letters, digits and - (as node names are)`));
    if (groups.length >= MAX_GROUP_DEPTH) {
      layout.problems.push(at(dir, `groups nest at most ${MAX_GROUP_DEPTH} deep; flatten ${dir}/`));
      return;
    }
    layout.groups.push(path);
    groups = [...groups, path];
  }
  for (const f of folders) await walk(tree, `${dir}/${f}`, groups, layout);
}

function at(file: string, message: string): Problem {
  return { file, line: 1, col: 1, message };
}
