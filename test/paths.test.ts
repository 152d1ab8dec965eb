/**
 * One path, one resource: `/etc/x`, `/etc//x`, `/etc/./x` and `/etc/x/` are one file, so a
 * declaration may write it only one way. Before, the host owned one id per spelling, flipped the
 * content every pass, and a trailing-slash `ensure: absent` deleted what the others declared.
 * Now the built host refuses such a declaration with the place and the form to write, and
 * changes nothing; `validate` says the same.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

describe('paths have one form', () => {
  it('a declaration that names one file by two spellings applies nothing and says which form to write', async () => {
    const dir = tempDir('mesh-paths-');
    const root = newMachine(join(dir, 'root'));
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'base.yaml'), 'resources:\n  - type: file\n    path: /etc/x\n    content: "a\\n"\n  - type: file\n    path: /etc//x\n    content: "b\\n"\n  - type: file\n    path: /etc/x/\n    ensure: absent\n');
    const run = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--json', '--root', root], root);
    expect(run.code).toBe(1);
    const body = JSON.parse(run.stdout) as { outcome: string; resources: unknown[]; errors: Array<{ file: string; line: number; col: number; message: string }> };
    expect(body).toMatchObject({ outcome: 'failed', resources: [] });
    expect(body.errors.map((e) => `${e.line}:${e.col}: ${e.message}`)).toEqual([
      '6:11: resources.1.path: write it as /etc/x (one form per path: no //, no /./, no trailing /)',
      '9:11: resources.2.path: write it as /etc/x (one form per path: no //, no /./, no trailing /)',
    ]);
    expect(existsSync(join(root, 'etc/x'))).toBe(false);
  });
});
