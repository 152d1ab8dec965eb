/**
 * The report index is written part by part, its strings encoded slice by slice into one reused
 * buffer (mesh-cli/status/index-file.ts writeParts): the file must hold exactly the UTF-8 of the
 * parts joined, whatever characters fall on a slice's edge.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeParts } from '../mesh-cli/status/index-file.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();
/** writeParts' slice, in UTF-16 units. */
const SLICE = 64 * 1024;

function written(parts: Array<string | Uint8Array>): Buffer {
  const file = join(tempDir('mesh-index-file-'), 'reports.json');
  writeParts(file, parts);
  expect(existsSync(`${file}.tmp`)).toBe(false);
  return readFileSync(file);
}

const utf8 = (parts: Array<string | Uint8Array>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)));

describe('writing the report index in parts', () => {
  it('writes a character whose two UTF-16 halves straddle a slice edge whole', () => {
    const parts = ['x'.repeat(SLICE - 1) + '😀' + 'é'.repeat(SLICE) + '😀', '\n', 'ü'.repeat(3 * SLICE + 7)];
    const bytes = written(parts);
    expect(bytes.equals(utf8(parts))).toBe(true);
    expect(bytes.includes(Buffer.from([0xef, 0xbf, 0xbd]))).toBe(false); // no replacement character
  });

  it('writes strings of three-byte characters longer than the buffer, bytes as given, and empty parts', () => {
    const parts = ['€'.repeat(2 * SLICE + 1), new Uint8Array([0, 1, 2, 255]), '', '{"a":"ok"}', '\n'];
    expect(written(parts).equals(utf8(parts))).toBe(true);
  });

  it('writes a lone surrogate as the replacement character, as Buffer.from does, wherever it falls', () => {
    const parts = ['y'.repeat(SLICE - 1) + '\ud83d' + 'z', '\udc00'];
    expect(written(parts).equals(utf8(parts))).toBe(true);
  });
});
