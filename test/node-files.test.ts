/**
 * Where status finds each node.yaml on main (mesh-cli/status/read-out.ts readNodeFiles): read from
 * a `git ls-tree -r -z` listing of nodes/, and kept in .git/mesh/nodes.json by the listing's hash.
 * The kept answer is used only for the very listing it was made from: a node moved into a group,
 * a node.yaml changed, or a damaged file means the nodes are found again.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readNodeFiles } from '../mesh-cli/status/read-out.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const C = 'c'.repeat(40);
const D = 'd'.repeat(40);

/** A listing as `git ls-tree -r -z` prints it. */
function listing(entries: Array<[path: string, oid: string, type?: string]>): Promise<string> {
  return Promise.resolve(entries.map(([path, oid, type = 'blob']) => `${type === 'commit' ? '160000' : '100644'} ${type} ${oid}\t${path}\0`).join(''));
}

const flat: Array<[string, string]> = [['nodes/web-1/node.yaml', A], ['nodes/web-1/base.yaml', B], ['nodes/web-2/node.yaml', C]];

describe('readNodeFiles', () => {
  it('finds each node.yaml wherever it sits, and keeps the answer for the same listing only', async () => {
    const cache = join(tmp('mesh-nodefiles-'), 'mesh', 'nodes.json');
    const first = await readNodeFiles(listing(flat), cache);
    expect(first.places).toEqual(new Map([['web-1', 'nodes/web-1/node.yaml'], ['web-2', 'nodes/web-2/node.yaml']]));
    expect(first.ids).toEqual(new Map([['web-1', A], ['web-2', C]]));
    // The same listing again: the kept answer, equal to the one found.
    const again = await readNodeFiles(listing(flat), cache);
    expect(again).toEqual(first);

    // web-2 moved into a group, with a new node.yaml: found again, not taken from the cache.
    const moved = await readNodeFiles(listing([flat[0]!, flat[1]!, ['nodes/eu/web-2/node.yaml', D]]), cache);
    expect(moved.places.get('web-2')).toBe('nodes/eu/web-2/node.yaml');
    expect(moved.ids.get('web-2')).toBe(D);
  });

  it('a node whose name is in two folders has no node.yaml and no identity; a damaged cache is made again', async () => {
    const cache = join(tmp('mesh-nodefiles-'), 'nodes.json');
    const twice = listing([...flat, ['nodes/eu/web-2/node.yaml', D]]);
    const found = await readNodeFiles(twice, cache);
    expect(found.places.get('web-2')).toBeNull();
    expect(found.ids.has('web-2')).toBe(false);
    expect(found.ids.get('web-1')).toBe(A);

    writeFileSync(cache, '{"key": "');
    expect(await readNodeFiles(twice, cache)).toEqual(found);
    expect(JSON.parse(readFileSync(cache, 'utf8')).places).toEqual([...found.places]);
  });

  it('a submodule under nodes/ is no node.yaml', async () => {
    const cache = join(tmp('mesh-nodefiles-'), 'nodes.json');
    const found = await readNodeFiles(listing([flat[0]!, ['nodes/web-3/node.yaml', B, 'commit']]), cache);
    expect(found.ids).toEqual(new Map([['web-1', A]]));
  });
});
