/**
 * Every node's resolved declaration at a commit, and which nodes' declarations differ
 * between two commits. "Differs" means the resolved resources differ (a role change
 * touches every node that includes it; a token issue touches none), the same digest the
 * host puts in its report.
 */
import { createHash } from 'node:crypto';
import { loadDeclaration, type DeclarationResult } from '../core/declaration/load.js';
import { commitTree, type FleetTree } from './tree.js';
import { git } from './git.js';
import { placeOfDir } from '../core/fleet/layout.js';
import { PLACEHOLDER_FACTS } from '../schema/facts.js';

/** The node folders under nodes/ (a folder per node; files such as nodes/README.md are not nodes). */
export function nodeFolders(tree: FleetTree): Promise<string[]> {
  return tree.folders('nodes');
}

/** Every node's declaration in `tree`, by node name. */
export async function loadAll(tree: FleetTree, nodes?: string[]): Promise<Map<string, DeclarationResult>> {
  const names = nodes ?? (await nodeFolders(tree));
  const results = await Promise.all(names.map(async (n) => [n, await loadDeclaration(tree, n, { facts: PLACEHOLDER_FACTS, place: placeOfDir(`nodes/${n}`) })] as const));
  return new Map(results);
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
  /** Changed files between the two commits that feed this node's declaration (its own files and roles). */
  because: string[];
}

/** Nodes whose resolved declaration differs between `base` and `head` (commits, or the empty tree). */
export async function changedNodes(dir: string, base: string, head: string): Promise<NodeChange[]> {
  const changed = (await git(dir, ['diff-tree', '-r', '--name-only', '-z', '--no-commit-id', base, head])).split('\0').filter(Boolean);
  if (!changed.some((p) => p.startsWith('nodes/') || p.startsWith('roles/'))) return [];
  const [baseTree, headTree] = await Promise.all([commitTree(dir, base), commitTree(dir, head)]);
  // A changed role can touch any node; otherwise only nodes whose own folder changed.
  const candidates = changed.some((p) => p.startsWith('roles/'))
    ? [...new Set([...(await nodeFolders(baseTree)), ...(await nodeFolders(headTree))])]
    : [...new Set(changed.map((p) => p.split('/')).filter((parts) => parts[0] === 'nodes' && parts.length > 2).map((parts) => parts[1]!))];
  const [before, after] = await Promise.all([loadAll(baseTree, candidates), loadAll(headTree, candidates)]);
  const result: NodeChange[] = [];
  for (const node of candidates.sort()) {
    const b = before.get(node)!;
    const h = after.get(node)!;
    if (declarationKey(b) === declarationKey(h)) continue;
    const feeds = new Set([...b.ok ? b.declaration.files : b.files, ...h.ok ? h.declaration.files : h.files]);
    result.push({ node, base: b, head: h, because: changed.filter((p) => feeds.has(p) || p.startsWith(`nodes/${node}/`)) });
  }
  return result;
}
