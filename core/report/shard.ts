/**
 * Which repository holds a node's report branch when mesh.yaml shards the reports
 * (`reports.shards`, a list of repository URLs): the one a rendezvous hash of the node's name
 * picks. Each shard `i` scores the node with sha256(node NUL i); the highest score wins. The
 * choice depends only on the name and the shard's position, so `token issue` (which hands the
 * host its shard's URL) and `status` (which reads each node from its shard only) agree without
 * storing it; and a shard appended to the list takes about 1/(K+1) of the nodes from the others,
 * while every other node stays where it was.
 */
import { createHash } from 'node:crypto';
import { MeshConfig } from '../../schema/fleet.js';
import { loadYaml } from '../load.js';

/** The position in `shards` (K > 0 entries) of the shard that holds `node`'s report branch. */
export function shardOf(node: string, shards: number): number {
  let best = 0;
  let bestScore = -1;
  for (let i = 0; i < shards; i++) {
    const score = createHash('sha256').update(`${node}\0${i}`).digest().readUIntBE(0, 6);
    if (score > bestScore) [best, bestScore] = [i, score];
  }
  return best;
}

/** The shard URLs of the mesh.yaml text `meshYaml`; null when it names none or does not read. */
export function shardList(meshYaml: string | null): string[] | null {
  if (meshYaml === null) return null;
  const loaded = loadYaml(meshYaml, 'mesh.yaml', MeshConfig);
  return (loaded.ok ? loaded.value.reports?.shards : undefined) ?? null;
}

/** The URL of `node`'s report shard by the mesh.yaml text `meshYaml`; null when it names no shards or does not read. */
export function shardUrlOf(meshYaml: string | null, node: string): string | null {
  const shards = shardList(meshYaml);
  return shards ? shards[shardOf(node, shards.length)]! : null;
}

/** Whether the shard list `after` is `before` with nothing changed but URLs appended (or there was no list). */
export function appendsOnly(before: readonly string[] | null, after: readonly string[] | null): boolean {
  return !before || (after !== null && before.every((url, i) => after[i] === url));
}

/**
 * What a change of the shard list from `before` to `after` does that appending cannot: one line
 * each, for a reviewer. Empty when the list is unchanged, new, or the old one with URLs appended at
 * its end (the change `mirror sync` is made for: each node moves at most once, to a new shard).
 * `nodes`: the fleet's node names, to count who would report somewhere else.
 */
export function shardListChanges(before: readonly string[] | null, after: readonly string[] | null, nodes: readonly string[]): string[] {
  if (!before || appendsOnly(before, after)) return [];
  const of = (list: readonly string[], node: string) => list[shardOf(node, list.length)]!;
  if (!after) {
    return [`reports.shards removed (it listed ${before.length}): each host keeps pushing to its last shard, and status reads only the fleet repository`];
  }
  const lines: string[] = [];
  for (const url of before) {
    if (after.includes(url)) continue;
    const there = nodes.filter((n) => of(before, n) === url).length;
    lines.push(`shard removed: ${url} holds the report branches of ${there} node${there === 1 ? '' : 's'}, and mirror sync moves branches only between the shards listed`);
  }
  const moved = nodes.filter((n) => of(before, n) !== of(after, n)).length;
  lines.push(`${moved} of ${nodes.length} node${nodes.length === 1 ? '' : 's'} would report to another shard: the list is not the old one with URLs appended at its end (append new shards; do not reorder or remove)`);
  return lines;
}
