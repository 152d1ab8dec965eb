/** The host's cache of a rendered declaration (agent/declaration-cache.ts): reused only when every input reads the same. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withDeclarationCache } from '../agent/declaration-cache.js';
import { loadDeclarationWith, type DeclarationResult, type TreeReader } from '../core/declaration/declaration.js';
import { parseDeclaration } from '../core/declaration/load.js';
import { placeOfDir } from '../core/fleet/layout.js';
import { PLACEHOLDER_FACTS, type Facts } from '../schema/facts.js';
import { fromFiles } from '../mesh-cli/tree.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();

/** A fleet commit in memory: web-1 in group web, a templated file reading a variable of each level and a fact. */
function fleet(): Map<string, string> {
  return new Map(Object.entries({
    'nodes/vars.yaml': 'port: 8080\n',
    'nodes/web/vars.yaml': 'workers: 4\n',
    'nodes/web/web-1/node.yaml': 'node: web-1\n',
    'nodes/web/web-1/base.yaml': [
      'resources:',
      '  - type: file',
      '    path: /etc/app.conf',
      '    template: true',
      '    content: "port={{ vars.port }} workers={{ vars.workers }} host={{ facts.hostname }}\\n"',
      '',
    ].join('\n'),
    'roles/unused.yaml': 'resources: []\n',
  }));
}

/** One pass's load through a fresh cache over `files` (as each pass makes its own reader); counts the parses. */
function loader(file: string) {
  let parses = 0;
  const parser = async () => {
    parses++;
    return parseDeclaration;
  };
  const load = (files: Map<string, string>, facts: Facts = PLACEHOLDER_FACTS): Promise<DeclarationResult> => {
    const tree: TreeReader = withDeclarationCache(fromFiles(files), file);
    return loadDeclarationWith(tree, 'web-1', { facts, place: placeOfDir('nodes/web/web-1') }, parser);
  };
  return { load, parses: () => parses };
}

const content = (r: DeclarationResult) => (r.ok ? r.declaration.resources.map((x) => ('content' in x ? x.content : null)) : r.problems);

describe('the declaration cache', () => {
  it('answers a second load of the same files and facts without parsing', async () => {
    const { load, parses } = loader(join(tmp('mesh-decl-cache-'), 'cache.json'));
    const files = fleet();
    const first = await load(files);
    expect(content(first)).toEqual(['port=8080 workers=4 host=placeholder-host\n']);
    expect(parses()).toBe(1);
    const second = await load(files);
    expect(parses()).toBe(1);
    expect(second).toEqual(first);
  });

  it('renders again when a file it read changed: a variable of the group, the node’s own file', async () => {
    const { load, parses } = loader(join(tmp('mesh-decl-cache-'), 'cache.json'));
    const files = fleet();
    await load(files);
    files.set('nodes/web/vars.yaml', 'workers: 8\n');
    expect(content(await load(files))).toEqual(['port=8080 workers=8 host=placeholder-host\n']);
    expect(parses()).toBe(2);
    files.set('nodes/web/web-1/extra.yaml', 'resources:\n  - type: directory\n    path: /srv/app\n');
    const grown = await load(files);
    expect(parses()).toBe(3);
    expect(grown.ok && grown.declaration.resources.map((r) => ('path' in r ? r.path : r.type))).toEqual(['/etc/app.conf', '/srv/app']);
    // A file the declaration never read changes nothing.
    files.set('roles/unused.yaml', 'resources:\n  - type: directory\n    path: /opt\n');
    await load(files);
    expect(parses()).toBe(3);
  });

  it('renders again when the facts changed', async () => {
    const { load, parses } = loader(join(tmp('mesh-decl-cache-'), 'cache.json'));
    const files = fleet();
    await load(files);
    const other = await load(files, { ...PLACEHOLDER_FACTS, hostname: 'web-1.example.org' });
    expect(parses()).toBe(2);
    expect(content(other)).toEqual(['port=8080 workers=4 host=web-1.example.org\n']);
  });

  it('takes a torn or foreign cache file for a miss, never an error, and writes it anew', async () => {
    const file = join(tmp('mesh-decl-cache-'), 'cache.json');
    const { load, parses } = loader(file);
    const files = fleet();
    const first = await load(files);
    const whole = readFileSync(file, 'utf8');
    writeFileSync(file, whole.slice(0, whole.length >> 1));
    expect(await load(files)).toEqual(first);
    expect(parses()).toBe(2);
    expect(readFileSync(file, 'utf8')).toBe(whole);
    writeFileSync(file, JSON.stringify({ ...JSON.parse(whole), build: 'another build' }));
    expect(await load(files)).toEqual(first);
    expect(parses()).toBe(3);
  });

  it('keeps no declaration that failed to load', async () => {
    const file = join(tmp('mesh-decl-cache-'), 'cache.json');
    const { load, parses } = loader(file);
    const files = fleet();
    files.set('nodes/web/vars.yaml', '');
    const failed = await load(files);
    expect(failed.ok).toBe(false);
    expect(await load(files)).toEqual(failed);
    expect(parses()).toBe(2);
  });
});
