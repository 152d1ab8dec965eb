/**
 * Every node's resolved declaration at a commit, and which nodes' declarations differ
 * between two commits. "Differs" means the resolved resources differ (a role change
 * touches every node that includes it, a group's file or vars.yaml every node at or below
 * the group; a token issue touches none), the same digest the host puts in its report.
 * Nodes are found where they sit at each commit (core's layout), so a node moved between
 * groups is the same node.
 */
import { createHash } from 'node:crypto';
import { digestOf, loadDeclaration, type DeclarationResult } from '../core/declaration/load.js';
import { levelsOf, readLayout, type NodePlace } from '../core/fleet/layout.js';
import { commitTree, type FleetTree } from './tree.js';
import { git } from './git.js';
import { PLACEHOLDER_FACTS, type ReportedFacts } from '../schema/facts.js';

/** Every node in `tree` and where it sits under nodes/ (core's layout: a folder holding node.yaml is a node, any other a group). */
export async function nodePlaces(tree: FleetTree): Promise<Map<string, NodePlace>> {
  return (await readLayout(tree)).nodes;
}

/** The facts a node is rendered with, when known (from its last verified report); placeholders otherwise. */
export type FactsOf = (node: string) => ReportedFacts | undefined;

/** The declaration of each of `nodes` (every node in `tree` when not given) by node name; a node not in `tree` has an empty one. */
export async function loadAll(tree: FleetTree, nodes?: string[], known?: Map<string, NodePlace>, factsOf?: FactsOf): Promise<Map<string, DeclarationResult>> {
  const places = known ?? (await nodePlaces(tree));
  const names = nodes ?? [...places.keys()];
  const results = await Promise.all(names.map(async (n) => {
    const place = places.get(n);
    return [n, place ? await loadDeclaration(tree, n, { facts: factsOf?.(n) ?? PLACEHOLDER_FACTS, place }) : empty(n)] as const;
  }));
  return new Map(results);
}

function empty(node: string): DeclarationResult {
  return { ok: true, declaration: { node, files: [], resources: [], digest: digestOf([]) } };
}

/** What a declaration is, for comparing: its digest, or the problems that make it invalid. */
export function declarationKey(result: DeclarationResult): string {
  if (result.ok) return result.declaration.digest;
  return 'invalid:' + createHash('sha256').update(JSON.stringify(result.problems)).digest('hex');
}

/** One node whose resolved declaration differs between two commits. */
export interface NodeChange {
  node: string;
  base: DeclarationResult;
  head: DeclarationResult;
  /** Changed files between the two commits that feed this node's declaration (its own files, its groups', roles). */
  because: string[];
}

/** Nodes whose resolved declaration differs between `base` and `head` (commits, or the empty tree). */
export async function changedNodes(dir: string, base: string, head: string, factsOf?: FactsOf): Promise<NodeChange[]> {
  const changed = (await git(dir, ['diff-tree', '-r', '--name-only', '-z', '--no-commit-id', base, head])).split('\0').filter(Boolean);
  if (!changed.some((p) => p.startsWith('nodes/') || p.startsWith('roles/'))) return [];
  const [baseTree, headTree] = await Promise.all([commitTree(dir, base), commitTree(dir, head)]);
  const [basePlaces, headPlaces] = await Promise.all([nodePlaces(baseTree), nodePlaces(headTree)]);
  // A changed role can touch any node; otherwise only the nodes at or below a changed folder.
  const roles = changed.some((p) => p.startsWith('roles/'));
  const touched = (places: Map<string, NodePlace>) => [...places.values()].filter((place) => roles || changed.some((p) => feeds(p, place))).map((place) => place.node);
  const candidates = [...new Set([...touched(basePlaces), ...touched(headPlaces)])];
  const [before, after] = await Promise.all([loadAll(baseTree, candidates, basePlaces, factsOf), loadAll(headTree, candidates, headPlaces, factsOf)]);
  const result: NodeChange[] = [];
  for (const node of candidates.sort()) {
    const b = before.get(node)!;
    const h = after.get(node)!;
    if (declarationKey(b) === declarationKey(h)) continue;
    const files = new Set([...b.ok ? b.declaration.files : b.files, ...h.ok ? h.declaration.files : h.files]);
    const own = [basePlaces.get(node), headPlaces.get(node)].flatMap((place) => (place ? [`${place.dir}/`] : []));
    result.push({ node, base: b, head: h, because: changed.filter((p) => files.has(p) || own.some((dir) => p.startsWith(dir))) });
  }
  return result;
}

/** Whether the changed file `path` can feed `place`'s declaration: it is in the node's folder, or directly in one of its levels (nodes/, its groups). */
function feeds(path: string, place: NodePlace): boolean {
  return path.startsWith(`${place.dir}/`) || levelsOf(place).includes(path.slice(0, path.lastIndexOf('/')));
}
