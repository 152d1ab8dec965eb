/**
 * The quick declaration check (schema/declaration-fast.ts) against the zod schemas it stands in
 * for: on generated files and directories, valid and not, wherever it answers, the schema
 * accepts the same data and gives the same value (keys in the same order); and it answers for
 * the usual valid files and directories.
 */
import { describe, expect, it } from 'vitest';
import { seededRandom } from './helpers/random.js';
import { DeclarationFile, RoleFile } from '../schema/declaration.js';
import { fastDeclarationFile, fastVarsFile } from '../schema/declaration-fast.js';
import { VarsFile } from '../schema/vars.js';

const random = seededRandom;

const VALUES: Record<string, unknown[]> = {
  type: ['file', 'directory', 'symlink', 'package', 'File', '', 1, null],
  path: ['/etc/app.ini', '/srv/d1/f1.conf', '/', '/etc//x', '/etc/./x', '/etc/x/', '/etc/../x', 'etc/x', '', '/a\0b', '/..', '/.', '/a..b', 7, null, undefined],
  content: ['text\n', '', 'a\0b', 5, null, ['x'], undefined],
  source: ['app.ini', '', 3, null],
  template: [true, false, 'true', 1, null],
  mode: ['0644', '644', '0755', '4755', '0888', '06444', 644, '', null, undefined],
  owner: ['root', 'www-data', '_x', 'a.b+c', '1root', 'a b', '', 0, null],
  group: ['root', 'adm', 'bad name', 1],
  ensure: ['present', 'absent', 'gone', true, null],
  target: ['/x'],
  name: ['nginx'],
  bogus: [1],
};
const KEYS = Object.keys(VALUES);

describe('the quick declaration check', () => {
  it('gives what the schemas give, whenever it answers', () => {
    const rnd = random(2026);
    const pick = <T,>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    let answered = 0;
    for (let n = 0; n < 20000; n++) {
      const resources: unknown[] = [];
      const count = 1 + Math.floor(rnd() * 3);
      for (let k = 0; k < count; k++) {
        const r: Record<string, unknown> = {};
        // Mostly plausible resources, in any key order, with now and then a wrong value or key.
        const keys = [...KEYS].sort(() => rnd() - 0.5).filter((key) => (key === 'type' || key === 'path' ? rnd() < 0.95 : rnd() < (['bogus', 'target', 'name', 'source'].includes(key) ? 0.05 : 0.4)));
        for (const key of keys) r[key] = rnd() < 0.8 ? VALUES[key]![0] : pick(VALUES[key]!);
        if (rnd() < 0.5) r.type = rnd() < 0.5 ? 'file' : 'directory';
        resources.push(rnd() < 0.01 ? pick([null, 'x', [r]]) : r);
      }
      const data = rnd() < 0.02 ? pick([{}, { resources: {} }, { resources, include: [] }, null, [resources]]) : { resources };
      const fast = fastDeclarationFile(structuredClone(data));
      if (fast === undefined) continue;
      answered++;
      for (const schema of [DeclarationFile, RoleFile]) {
        const slow = schema.safeParse(structuredClone(data));
        expect(slow.success, JSON.stringify(data)).toBe(true);
        expect(JSON.stringify(fast)).toBe(JSON.stringify(slow.data));
        expect(fast).toStrictEqual(slow.data);
      }
    }
    expect(answered).toBeGreaterThan(1000);
  });

  it('answers for plain files and directories, and leaves everything else to the schema', () => {
    const usual = { resources: [{ path: '/srv/d0', type: 'directory', mode: '0755' }, { type: 'file', path: '/srv/d0/f.conf', mode: '0644', content: 'x\n', owner: 'root', group: 'root', ensure: 'present' }, { type: 'file', path: '/etc/a', source: 'a.txt', template: true }] };
    expect(fastDeclarationFile(usual)).toStrictEqual(DeclarationFile.parse(usual));
    expect(fastDeclarationFile({ resources: [{ type: 'service', name: 'nginx' }] })).toBeUndefined();
    expect(fastDeclarationFile({ include: ['roles/x.yaml'], resources: [] })).toBeUndefined();
    expect(fastDeclarationFile({ resources: [{ type: 'file', path: '/etc/a', content: 'x', source: 'y' }] })).toBeUndefined();
  });

  it('gives what VarsFile gives for a vars.yaml, whenever it answers', () => {
    const rnd = random(7);
    const names = ['port', 'Port_2', '_x', 'a', '2x', 'a-b', 'a.b', '', 'x y', '__proto__', 'constructor', 'toString', 'é'];
    const values = [8080, 'x', null, true, [1, 2], { a: 1 }, '{{ x }}'];
    let answered = 0;
    for (let n = 0; n < 5000; n++) {
      const data: Record<string, unknown> = {};
      for (let k = Math.floor(rnd() * 4); k > 0; k--) Object.defineProperty(data, names[Math.floor(rnd() * names.length)]!, { value: values[Math.floor(rnd() * values.length)], enumerable: true, configurable: true, writable: true });
      const input = rnd() < 0.03 ? [data] : data;
      const fast = fastVarsFile(input);
      if (fast === undefined) continue;
      answered++;
      const slow = VarsFile.safeParse(input);
      expect(slow.success, JSON.stringify(input)).toBe(true);
      expect(Object.keys(fast)).toStrictEqual(Object.keys(slow.data!));
      expect(fast).toStrictEqual(slow.data);
    }
    expect(answered).toBeGreaterThan(1000);
  });
});
