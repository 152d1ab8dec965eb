/**
 * The fast YAML path (core/yaml-plain.ts) against `yaml` itself: on thousands of generated
 * documents, wherever the fast path answers, `yaml` reads the same text without an error or a
 * warning and gives the same value, keys in the same order. And the fast path does answer for
 * what declarations are usually written as (the bench's workload, the example fleet).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { describe, expect, it } from 'vitest';
import { seededRandom } from './helpers/random.js';
import { parsePlainYaml } from '../core/yaml-plain.js';

function slow(text: string): { ok: boolean; value?: unknown } {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, strict: true });
  if (doc.errors.length > 0 || doc.warnings.length > 0) return { ok: false };
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount: 100 }) };
  } catch {
    return { ok: false };
  }
}

const random = seededRandom;

const SCALARS = [
  'x', 'file', '/etc/app.ini', 'file:/etc/x', 'a b', 'a  b', 'a #c', 'a#b', 'a: b', 'a:', 'a:b', '0644', '"0644"', "'0644'", '644', '0', '00', '1.5', '1e3', '-1', '+1', '.5', '0x1F', '0o7',
  '12345678901234567890', 'true', 'True', 'TRUE', 'tRue', 'false', 'no', 'yes', 'on', 'null', 'Null', '~', '', '-', '- x', '-x', '?', '? x', ':x', '[a]', '{a: 1}', 'x[1]', 'x{1}', 'a,b', '&a x', '*a', '!!str 1',
  '!x', '|', '>', '%x', '@x', '`x', '"a"', '"a\\"b"', '"a\\nb"', '"\\x41"', '"\\u00e9"', '"\\ud800"', '"\\/"', '"\\e"', '"a" b', '"a" #c', "'a''b'", "'a' #c", "'a'b", '"unterminated', "'unterminated", 'café', '{{ vars.port }}',
  '"{{ facts.hostname }}"', '[]', '{}', '[ ]', '{ }', '[] # c', '[]#c', '{}x', '[],', '[]]', '{}:', '[] x', 'a\u00a0b', '.inf', '-.inf', '.nan', '<<', '=', 'a \\ b', '"a\\\\"', '"\\\\u0041"', 'x  ', 'é', '\u2028', '"#"', "'#'", 'a\'b', 'a"b',
];
const KEYS = ['a', 'b', 'type', 'path', 'mode', 'content', 'resources', 'include', 'with', 'a.b', 'a-b', 'a/b', '_x', 'true', 'null', '1', '"q"', "'q'", '? k', 'a b', '__proto__', '<<', 'x '];

function generate(rnd: () => number): string {
  const pick = <T,>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const out: string[] = [];
  const node = (indent: number, depth: number, inItem: boolean): void => {
    const pad = ' '.repeat(indent);
    const n = 1 + Math.floor(rnd() * 3);
    const isSeq = rnd() < 0.4;
    for (let k = 0; k < n; k++) {
      const lead = inItem && k === 0 ? '' : pad;
      const head = isSeq ? `${lead}-` : `${lead}${pick(KEYS)}:`;
      const r = rnd();
      if (depth < 3 && r < 0.35) {
        if (isSeq && rnd() < 0.5) {
          // a compact map or sequence on the item's line
          out.push(`${head} `);
          const last = out.length - 1;
          const before = out.length;
          node(indent + 2, depth + 1, true);
          if (out.length > before) out[last] = out[last]! + out.splice(before, 1)[0]!;
        } else {
          out.push(head + (rnd() < 0.1 ? ' # c' : ''));
          const inner = rnd() < 0.15 && !isSeq ? indent : indent + 1 + Math.floor(rnd() * 3);
          node(inner, depth + 1, false);
        }
      } else {
        const v = pick(SCALARS);
        out.push(v === '' ? head : `${head} ${v}${rnd() < 0.1 ? ' # note' : ''}`);
      }
      if (rnd() < 0.08) out.push(pick(['', '#c', '   # c', ' '.repeat(indent + 1) + 'x', '  ', '---', '...']));
    }
  };
  node(0, 0, false);
  return out.join('\n') + (rnd() < 0.5 ? '\n' : '');
}

describe('the fast YAML path', () => {
  it('reads what it answers for as yaml does, and gives up on everything else', () => {
    const rnd = random(20261205);
    let answered = 0;
    for (let n = 0; n < 20000; n++) {
      const text = generate(rnd);
      const fast = parsePlainYaml(text);
      if (fast === undefined) continue;
      answered++;
      const expected = slow(text);
      expect.soft(expected.ok, text).toBe(true);
      if (!expected.ok) continue;
      expect(JSON.stringify(fast), text).toBe(JSON.stringify(expected.value));
      expect(fast, text).toStrictEqual(expected.value);
    }
    // The generator must exercise the fast path, not only the giving up.
    expect(answered).toBeGreaterThan(2000);
  });

  it('answers for an empty or comment-only document as yaml does (null)', () => {
    for (const text of ['', '\n', '# just a comment\n', '  \n#x\n']) expect(parsePlainYaml(text)).toBe(slow(text).value ?? null);
  });

  it('answers for the bench workload and the example fleet, identically to yaml', () => {
    // As scripts/bench-workload.mjs writes it.
    const lines = ['resources:'];
    for (let d = 0; d < 20; d++) lines.push('  - type: directory', `    path: /srv/d${d}`, '    mode: "0755"');
    for (let i = 0; i < 200; i++) {
      lines.push('  - type: file', `    path: /srv/d${i % 20}/f${i}.conf`, '    mode: "0644"');
      if (i % 2 === 0) lines.push(`    content: ${JSON.stringify(`# file ${i}\nname=f${i}\nport=8080\nworkers=1,2,3\n`)}`);
      else lines.push('    template: true', `    content: ${JSON.stringify(`# file ${i}\nport={{ vars.port }}\nworkers={% for w in (1..3) %}{{ w }}{% endfor %}\n`)}`);
    }
    const bench = lines.join('\n') + '\n';
    expect(parsePlainYaml(bench)).toBeDefined();
    expect(parsePlainYaml(bench)).toStrictEqual(slow(bench).value);
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (/\.ya?ml$/.test(name)) files.push(path);
      }
    };
    walk(join(import.meta.dirname, '../examples'));
    let answered = 0;
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      const fast = parsePlainYaml(text);
      if (fast === undefined) continue;
      answered++;
      expect(fast, file).toStrictEqual(slow(text).value);
    }
    expect(answered).toBeGreaterThan(0);
    // The example's mesh.yaml (`signers: []`) takes the fast path: status and every other command of such a fleet start without the yaml library.
    const mesh = files.find((f) => f.endsWith('/mesh.yaml'));
    expect(mesh).toBeDefined();
    expect(parsePlainYaml(readFileSync(mesh!, 'utf8'))).toMatchObject({ signers: [] });
  });

  it('answers for empty flow collections only', () => {
    expect(parsePlainYaml('a: []\nb: {}\nc:\n  - []\n  - {} # none\n')).toStrictEqual({ a: [], b: {}, c: [[], {}] });
    for (const text of ['a: [ ]\n', 'a: [x]\n', 'a: {x: 1}\n', 'a: []#c\n', 'a: [] x\n', 'a: []]\n', '[]\n']) expect(parsePlainYaml(text), text).toBeUndefined();
  });
});
