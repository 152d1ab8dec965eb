import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { layerViolations } from './helpers/layers.js';

const top = join(import.meta.dirname, '..');

describe('layers: schema ← core ← {agent, mesh-cli}', () => {
  it('the tree keeps the rule', () => {
    expect(layerViolations(top)).toEqual([]);
  });

  const scratch = mkdtempSync(join(tmpdir(), 'mesh-layers-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

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
    const tree = mkdtempSync(join(scratch, 'tree-'));
    for (const layer of ['schema', 'core', 'agent', 'mesh-cli']) cpSync(join(top, layer), join(tree, layer), { recursive: true });
    writeFileSync(join(tree, file), text);
    const found = layerViolations(tree);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ file, line });
  });
});
