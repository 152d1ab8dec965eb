/**
 * Hostile input: the YAML/declaration loader and the report and token parsers, fed
 * arbitrary and mutated input, never crash or hang and always answer with problems that
 * carry a file, line and column. (The signature parser's fuzzing is in sign.test.ts.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeclarationFile } from '../schema/declaration.js';
import { MeshConfig, NodeIdentity } from '../schema/fleet.js';
import { loadYaml, MAX_FILE_BYTES } from '../schema/load.js';
import { Report } from '../schema/report.js';
import { TokenFile } from '../schema/token.js';
import { verifyReport } from '../agent/verify-report.js';

const RUNS = 10_000;

const validDeclaration = `resources:
  - type: file
    path: /etc/motd
    content: "hi\\n"
    mode: "0644"
  - type: directory
    path: /srv/app
`;

/** Well-formed problems: every one has a place and a message. */
function checkLoaded(result: ReturnType<typeof loadYaml>): void {
  if (result.ok) return;
  expect(result.problems.length).toBeGreaterThan(0);
  for (const p of result.problems) {
    expect(p.file).toBe('f.yaml');
    expect(Number.isInteger(p.line) && p.line >= 1).toBe(true);
    expect(Number.isInteger(p.col) && p.col >= 1).toBe(true);
    expect(typeof p.message).toBe('string');
  }
}

/** The text with one slice replaced by arbitrary characters. */
const mutated = (base: string) =>
  fc.tuple(fc.nat({ max: base.length }), fc.nat({ max: 12 }), fc.string({ maxLength: 12, unit: 'binary' })).map(([at, cut, insert]) => base.slice(0, at) + insert + base.slice(at + cut));

describe('hostile input never crashes a parser', () => {
  for (const [name, schema] of [
    ['declaration', DeclarationFile],
    ['mesh.yaml', MeshConfig],
    ['node.yaml', NodeIdentity],
    ['token file', TokenFile],
    ['report', Report],
  ] as const) {
    it(`the ${name} loader answers arbitrary text with located problems`, () => {
      fc.assert(fc.property(fc.string({ maxLength: 200, unit: 'binary' }), (text) => checkLoaded(loadYaml(text, 'f.yaml', schema))), { numRuns: RUNS });
    });
  }

  it('the declaration loader answers mutations of a valid declaration with a value or located problems', () => {
    fc.assert(fc.property(mutated(validDeclaration), (text) => checkLoaded(loadYaml(text, 'f.yaml', DeclarationFile))), { numRuns: RUNS });
  });

  it('YAML bombs (aliases of aliases) are refused, not expanded', () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`)].join('\n');
    const result = loadYaml(bomb, 'f.yaml', DeclarationFile);
    expect(result.ok).toBe(false);
  });

  it('an oversized file is refused with a message before it is parsed', () => {
    const result = loadYaml('#'.repeat(MAX_FILE_BYTES + 1), 'f.yaml', DeclarationFile);
    expect(result).toEqual({ ok: false, problems: [{ file: 'f.yaml', line: 1, col: 1, message: `file is larger than ${MAX_FILE_BYTES} bytes; split it` }] });
  });

  it('report verification answers arbitrary status and signature text with a verdict, never a crash', () => {
    fc.assert(
      fc.property(fc.option(fc.string({ maxLength: 300 })), fc.option(fc.string({ maxLength: 300 })), (status, sig) => {
        const v = verifyReport('web-1', status, sig, { node: 'web-1', generation: 1 });
        expect(['invalid', 'missing']).toContain(v.signature);
      }),
      { numRuns: RUNS },
    );
  });
});
