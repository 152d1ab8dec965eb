/**
 * The report index is written part by part, its strings encoded slice by slice into one reused
 * buffer (mesh-cli/status/index-file.ts writeParts): the file must hold exactly the UTF-8 of the
 * parts joined, whatever characters fall on a slice's edge. Each write goes through a temporary
 * file of its own (status/temp-file.ts), so that two status runs at once never mix their files.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { intact, readTexts, writeTexts, type ReportTexts } from '../mesh-cli/report-texts.js';
import { writeParts } from '../mesh-cli/status/index-file.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();
/** writeParts' slice, in UTF-16 units. */
const SLICE = 64 * 1024;

function written(parts: Array<string | Uint8Array>): Buffer {
  const file = join(tempDir('mesh-index-file-'), 'reports.json');
  writeParts(file, parts);
  expect(readdirSync(join(file, '..'))).toEqual(['reports.json']);
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

describe('the files status keeps, written by two runs at once', () => {
  const texts = (n: number, text: string): Map<string, ReportTexts> =>
    new Map(Array.from({ length: n }, (_, i) => [`node-${i}`, { commit: `${i}`.padStart(40, '0'), status: Buffer.from(`${text} ${i}`), sig: null, statusId: null, sigId: null }]));

  it('leaves one writer\'s whole file, never a mix of the two, and no temporary file', async () => {
    const dir = tempDir('mesh-index-file-');
    const file = join(dir, 'report-texts.bin');
    // The longer one starts first: through one shared temporary file, the shorter one's bytes would land over its head.
    const long = texts(2000, 'a longer report text that the other writer does not have');
    const short = texts(10, 'short');
    await Promise.all([writeTexts(file, long), writeTexts(file, short)]);
    const read = readTexts(file);
    expect([long, short].some((m) => read.size === m.size && [...m].every(([node, t]) => read.get(node)?.status?.equals(t.status!)))).toBe(true);
    expect(readdirSync(dir)).toEqual(['report-texts.bin']);
  });

  it('reads each text back with the blob id it was fetched as, and a text that no longer hashes to it is not intact', async () => {
    const file = join(tempDir('mesh-index-file-'), 'report-texts.bin');
    const blob = (text: string, algorithm = 'sha1') => createHash(algorithm).update(`blob ${Buffer.byteLength(text)}\0${text}`).digest('hex');
    const status = '{"node": "web-1", "outcome": "applied"}\n';
    const sig = '-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n';
    await writeTexts(file, new Map<string, ReportTexts>([
      ['web-1', { commit: 'a'.repeat(40), status: Buffer.from(status), sig: Buffer.from(sig), statusId: blob(status), sigId: blob(sig) }],
      ['web-2', { commit: 'b'.repeat(64), status: Buffer.from(status), sig: null, statusId: blob(status, 'sha256'), sigId: null }],
    ]));
    const read = readTexts(file);
    expect(read.get('web-1')).toMatchObject({ commit: 'a'.repeat(40), statusId: blob(status), sigId: blob(sig) });
    expect([...read.values()].map(intact)).toEqual([true, true]);
    // One byte of web-1's status.json changed in the file ("applied" to "applies"): its record still reads, but is not intact.
    const bytes = readFileSync(file);
    bytes[bytes.indexOf('applied') + 6] = 's'.charCodeAt(0);
    writeFileSync(file, bytes);
    const damaged = readTexts(file);
    expect(damaged.get('web-1')!.status!.toString()).toContain('applies');
    expect([intact(damaged.get('web-1')!), intact(damaged.get('web-2')!)]).toEqual([false, true]);
    // A signature without its id, or an id without its text, is not intact either.
    expect(intact({ ...read.get('web-1')!, sigId: null })).toBe(false);
    expect(intact({ ...read.get('web-2')!, sigId: blob(sig) })).toBe(false);
  });

  it('removes the temporary files a killed run left behind, and not another run\'s in progress', () => {
    const dir = tempDir('mesh-index-file-');
    const file = join(dir, 'reports.json');
    const hourAgo = new Date(Date.now() - 3600_000);
    for (const name of ['reports.json.tmp', 'reports.json.4242-3.tmp', 'reports.json.4343-1.tmp', 'identities.json.4242-1.tmp']) writeFileSync(join(dir, name), 'cut off');
    for (const name of ['reports.json.4242-3.tmp', 'identities.json.4242-1.tmp']) utimesSync(join(dir, name), hourAgo, hourAgo);
    writeParts(file, ['{}', '\n']);
    // The old-style name and the stale one of this file go; a fresh one (a run writing now) and another file's stay.
    expect(readdirSync(dir).sort()).toEqual(['identities.json.4242-1.tmp', 'reports.json', 'reports.json.4343-1.tmp']);
    expect(existsSync(file)).toBe(true);
  });
});
