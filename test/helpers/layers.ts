/**
 * The layer rule, read from the source: schema/ imports nothing of ours; core/ imports only
 * schema/; agent/ and mesh-cli/ import core/ and schema/, never each other. Every form of import
 * counts: static, type-only, side-effect, re-export and dynamic import().
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

export const LAYERS: Record<string, string[]> = {
  schema: ['schema'],
  core: ['schema', 'core'],
  agent: ['schema', 'core', 'agent'],
  'mesh-cli': ['schema', 'core', 'mesh-cli'],
};

export interface Violation {
  file: string;
  line: number;
  specifier: string;
  message: string;
}

// `import x from '…'`, `import type {…} from '…'`, `import '…'`, `export {…} from '…'`,
// `export * from '…'` (the `from` may follow a multi-line list) and `import('…')`.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"]+)\1/gm;

/** Every relative import in the .ts files under `top`'s layer folders that crosses the rule. */
export function layerViolations(top: string): Violation[] {
  const out: Violation[] = [];
  for (const layer of Object.keys(LAYERS)) {
    for (const file of tsFiles(join(top, layer))) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(SPECIFIER)) {
        const specifier = m[2]!;
        if (!specifier.startsWith('.')) continue;
        const target = relative(top, resolve(dirname(file), specifier)).split(sep)[0]!;
        const allowed = LAYERS[layer]!;
        if (!allowed.includes(target) && target in LAYERS) {
          const line = text.slice(0, m.index).split('\n').length;
          out.push({ file: relative(top, file), line, specifier, message: `${layer}/ may import only ${allowed.join(', ')}; this imports ${target}/` });
        }
      }
    }
  }
  return out;
}

function tsFiles(dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => (e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}
