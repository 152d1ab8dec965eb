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

/** The URL of `node`'s report shard by the mesh.yaml text `meshYaml`; null when it names no shards or does not read. */
export function shardUrlOf(meshYaml: string | null, node: string): string | null {
  if (meshYaml === null) return null;
  const loaded = loadYaml(meshYaml, 'mesh.yaml', MeshConfig);
  const shards = loaded.ok ? loaded.value.reports?.shards : undefined;
  return shards ? shards[shardOf(node, shards.length)]! : null;
}
