import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { codeOnly, lazyImports, layerViolations } from './helpers/layers.js';

const top = join(import.meta.dirname, '..');
const scratch = mkdtempSync(join(tmpdir(), 'mesh-layers-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A copy of the layers with `text` written to `file`. */
function plantedTree(file: string, text: string): string {
  const tree = mkdtempSync(join(scratch, 'tree-'));
  for (const layer of ['schema', 'core', 'agent', 'mesh-cli']) cpSync(join(top, layer), join(tree, layer), { recursive: true });
  writeFileSync(join(tree, file), text);
  return tree;
}

describe('layers: schema ← core ← {agent, mesh-cli}', () => {
  it('the tree keeps the rule', () => {
    expect(layerViolations(top)).toEqual([]);
  });

  // Each form of import, planted in a copy of the tree, is caught with its file and line.
  const planted: Array<[string, string, string, number]> = [
    ['static', 'mesh-cli/planted.ts', "import { runPass } from '../agent/reconcile.js';\n", 1],
    ['type-only', 'mesh-cli/commands/planted.ts', "import type { Store } from '../../agent/store.js';\n", 1],
    ['re-export', 'agent/planted.ts', "export {\n  statusCommand,\n} from '../mesh-cli/commands/status.js';\n", 3],
    ['dynamic', 'agent/planted.ts', "export const later = () => import('../mesh-cli/main.js');\n", 1],
    ['side-effect', 'core/planted.ts', "import '../agent/main.js';\n", 1],
    ['core to agent', 'core/planted.ts', "import { HOST_VERSION } from '../core/version.js';\nimport { plan } from '../agent/apply.js';\n", 2],
    ['schema to core', 'schema/planted.ts', "export * from '../core/errors.js';\n", 1],
  ];
  it.each(planted)('a planted %s import across the layers is named', (_form, file, text, line) => {
    const found = layerViolations(plantedTree(file, text));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ file, line });
  });
});

describe('lazy import() only in the two main.ts files', () => {
  it('the tree keeps the rule', () => {
    expect(lazyImports(top)).toEqual([]);
  });

  it('strings, template text, comments and regular expressions are not code', () => {
    const text = "const a = \"import('x')\"; // import('y')\nconst b = `import('z') ${f(`import('w')`)}` / 2; /* import('v') */ const r = /import\\(/;\n";
    expect(codeOnly(text)).not.toMatch(/import/);
    expect(codeOnly(text)).toHaveLength(text.length);
    expect(codeOnly('const c = `${import(\'./x.js\')}`;')).toMatch(/import\(/);
  });

  // A lazy import planted outside the entry files is named with its file and line; one in an entry file, or in a string, is not.
  const planted: Array<[string, string, string, number]> = [
    ['in an agent file', 'agent/planted.ts', "export const x = 1;\nexport const later = async () => (await import('./log.js')).createLogger;\n", 1],
    ['in core', 'core/planted.ts', "export const later = () =>\n  import(\n    './errors.js');\n", 1],
    ['in a mesh-cli command', 'mesh-cli/commands/planted.ts', "export const later = () => import('../main.js');\n", 1],
    ['in an entry file', 'agent/main.ts', "export const later = () => import('./log.js');\n", 0],
    ['in a string', 'agent/planted.ts', "export const loader = \"import(require('node:url').pathToFileURL(f).href)\";\n", 0],
  ];
  it.each(planted)('a planted import() %s is named only outside the entry files', (_where, file, text, count) => {
    const found = lazyImports(plantedTree(file, text));
    expect(found).toHaveLength(count);
    if (count > 0) expect(found[0]).toMatchObject({ file, line: text.slice(0, text.indexOf('import(')).split('\n').length });
  });
});
