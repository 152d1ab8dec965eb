/**
 * The layer rule, read from the source: schema/ imports nothing of ours; core/ imports only
 * schema/; agent/ and mesh-cli/ import core/ and schema/, never each other. Every form of import
 * counts: static, type-only, side-effect, re-export and dynamic import(). And a second rule:
 * lazy `import()` appears only in the two entry files (start-up cost is decided there, and
 * they hand loaders down), never in a string, a comment or a regular expression's stead.
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

/** The only files that may load code lazily with `import()`. */
export const LAZY_ENTRIES = ['agent/main.ts', 'mesh-cli/main.ts'];

/** Every `import(` in code (not in a string, template text, comment or regular expression) of the layers' .ts files outside LAZY_ENTRIES. */
export function lazyImports(top: string): Violation[] {
  const out: Violation[] = [];
  for (const layer of Object.keys(LAYERS)) {
    for (const file of tsFiles(join(top, layer))) {
      const name = relative(top, file).split(sep).join('/');
      if (LAZY_ENTRIES.includes(name)) continue;
      const text = readFileSync(file, 'utf8');
      const code = codeOnly(text);
      for (const m of code.matchAll(/(?<![\w$.])import\s*\(/g)) {
        const line = text.slice(0, m.index).split('\n').length;
        out.push({ file: name, line, specifier: text.slice(m.index, text.indexOf('\n', m.index)).trim(), message: `import() only in ${LAZY_ENTRIES.join(' and ')}: hand a loader down from there` });
      }
    }
  }
  return out;
}

/**
 * `text` with every string, template text, comment and regular expression blanked out (same
 * length, newlines kept), so that what is left is code. Template `${…}` parts stay code.
 */
export function codeOnly(text: string): string {
  const out = text.split('');
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== '\n') out[k] = ' ';
  };
  const braces: number[] = []; // for each open template `${`, the brace depth it opened at
  let depth = 0;
  let last = ''; // the last significant code character, to tell a regular expression from a division
  let i = 0;
  const template = (start: number): number => {
    // from just after a ` or a closing } of `${…}`: to the end of the template text, or to `${`
    let k = start;
    while (k < text.length && text[k] !== '`' && !(text[k] === '$' && text[k + 1] === '{')) k += text[k] === '\\' ? 2 : 1;
    blank(start, k);
    if (text[k] === '$') {
      braces.push(depth);
      depth += 1;
      return k + 2;
    }
    return k + 1;
  };
  while (i < text.length) {
    const c = text[i]!;
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      blank(i, end < 0 ? text.length : end);
      i = end < 0 ? text.length : end;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      blank(i, end < 0 ? text.length : end + 2);
      i = end < 0 ? text.length : end + 2;
    } else if (c === "'" || c === '"') {
      let k = i + 1;
      while (k < text.length && text[k] !== c && text[k] !== '\n') k += text[k] === '\\' ? 2 : 1;
      blank(i + 1, k);
      i = k + 1;
      last = c;
    } else if (c === '`') {
      i = template(i + 1);
      last = '`';
    } else if (c === '/' && (last === '' || '(,=:[!&|?{};+-*%<>~^'.includes(last))) {
      let k = i + 1;
      let inClass = false;
      while (k < text.length && text[k] !== '\n' && (inClass || text[k] !== '/')) {
        if (text[k] === '[') inClass = true;
        else if (text[k] === ']') inClass = false;
        k += text[k] === '\\' ? 2 : 1;
      }
      blank(i + 1, k);
      i = k + 1;
      last = '/';
    } else {
      if (c === '{') depth += 1;
      if (c === '}') {
        depth -= 1;
        if (braces.length > 0 && braces[braces.length - 1] === depth) {
          braces.pop();
          i = template(i + 1);
          last = '`';
          continue;
        }
      }
      if (!/\s/.test(c)) last = c;
      i += 1;
    }
  }
  return out.join('');
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
