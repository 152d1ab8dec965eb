/**
 * Git's wire formats, read in memory: pkt-lines (protocol v2 requests and responses, with
 * side-band-64k) and version 2 packfiles, deltas included. mesh-cli/upload-pack.ts uses them to
 * read report branches straight from the server's answer, without writing a pack to the
 * checkout. Every object's id is computed here from its contents: the server's word is never
 * taken for one. Speed matters (10,000 reports are ~40,000 objects): one pass over the pack,
 * flat arrays, no per-object promises.
 */
import { createHash, hash } from 'node:crypto';
import { constants as zlibConstants, createInflate, inflateSync, type Inflate } from 'node:zlib';
import { MeshError } from '../core/errors.js';
import { brokenResponse as broken, errPacket, pktLines } from '../core/git/pkt-line.js';

export interface GitObject { type: 'commit' | 'tree' | 'blob' | 'tag'; data: Buffer }

const TYPES = [undefined, 'commit', 'tree', 'blob', 'tag'] as const;
const OFS_DELTA = 6;
// Every object's data is allocated with this many bytes of room before it, where its header
// ("blob 123\0") is written so that its oid is one hash call over one buffer, without a copy.
const ROOM = 32;
const REF_DELTA = 7;
const SLAB = 1 << 20;

/** What the parser met, summed over every pack read by this process (tests check deltas were really resolved; `ms`: time spent parsing). */
export const packStats = { packs: 0, objects: 0, ofsDeltas: 0, refDeltas: 0, ms: 0 };

/** The packfile in a protocol v2 fetch response: band 1 of its `packfile` section, joined once. */
export function packOfResponse(body: Buffer, where: string): Buffer {
  const chunks: Buffer[] = [];
  let section = '';
  for (const p of pktLines(body)) {
    if (typeof p === 'number') {
      if (p !== 1) break; // flush or response-end: the response is over
      section = '';
      continue;
    }
    if (section === 'packfile') {
      if (p[0] === 1) chunks.push(p.subarray(1));
      else if (p[0] === 3) throw new MeshError('E_FETCH', `${where} failed on the server: ${p.toString('utf8', 1).trimEnd()}`, { next: 'retry' });
      continue; // band 2 is progress
    }
    const err = errPacket(p);
    if (err !== null) throw new MeshError('E_FETCH', `${where} refused the request: ${err}`);
    if (section === '') section = p.toString('latin1').trimEnd(); // shallow-info, acknowledgments, ... then packfile
  }
  if (section !== 'packfile') throw broken(`${where} answered without a packfile`);
  return Buffer.concat(chunks);
}

/** Every object of a version 2 pack, by the oid computed from its contents; deltas resolved. */
export function parsePack(pack: Buffer, opts: { portable?: boolean } = {}): Map<string, GitObject> {
  const started = performance.now();
  try {
    return parseWhole(pack, opts);
  } finally {
    packStats.ms += performance.now() - started;
  }
}

function parseWhole(pack: Buffer, opts: { portable?: boolean }): Map<string, GitObject> {
  if (pack.length < 32 || pack.toString('latin1', 0, 4) !== 'PACK' || pack.readUInt32BE(4) !== 2) throw broken('not a version 2 pack');
  const end = pack.length - 20;
  if (!createHash('sha1').update(pack.subarray(0, end)).digest().equals(pack.subarray(end))) throw broken('its checksum does not match');
  const count = pack.readUInt32BE(8);
  // Per object: its type (1-4, or 6/7 until resolved), its data (or delta), and its delta base.
  const kinds = new Uint8Array(count);
  const datas: Buffer[] = new Array(count);
  const bases: Array<number | string> = new Array(count);
  const inflate = opts.portable ? inflateOne : zlibHandle() ?? inflateOne;
  let off: number;
  try {
    off = readEntries(pack, end, count, inflate, kinds, datas, bases);
  } finally {
    inflate.close?.();
  }
  if (off !== end) throw broken('it has bytes after its last object');
  return resolve(kinds, datas, bases);
}

/** Read `count` entries from byte 12 on: each one's type, base and inflated data; returns where they end. */
function readEntries(pack: Buffer, end: number, count: number, inflate: Inflater, kinds: Uint8Array, datas: Buffer[], bases: Array<number | string>): number {
  const byOffset = new Map<number, number>();
  let off = 12;
  for (let i = 0; i < count; i++) {
    if (off >= end) throw broken('it ends early');
    const start = off;
    let c = pack[off++]!;
    const kind = (c >> 4) & 7;
    let size = c & 15;
    for (let shift = 4; c & 0x80; shift += 7) size += ((c = pack[off++]!) & 0x7f) * 2 ** shift;
    if (kind === OFS_DELTA) {
      c = pack[off++]!;
      let back = c & 0x7f;
      while (c & 0x80) back = (back + 1) * 128 + ((c = pack[off++]!) & 0x7f);
      const base = byOffset.get(start - back);
      if (base === undefined) throw broken(`a delta at ${start} names no object as its base`);
      bases[i] = base;
    } else if (kind === REF_DELTA) {
      bases[i] = pack.toString('hex', off, off += 20);
    } else if (kind < 1 || kind > 4) throw broken(`unknown object type ${kind} at ${start}`);
    const { data, used } = inflate(pack, off, end, size);
    if (data.length !== size) throw broken(`object at ${start} inflates to ${data.length} bytes, not ${size}`);
    off += used;
    kinds[i] = kind;
    datas[i] = data;
    byOffset.set(start, i);
  }
  return off;
}

type Inflater = ((buf: Buffer, off: number, end: number, size: number) => { data: Buffer; used: number }) & { close?: () => void };

/** Inflate the zlib stream at `off` (its compressed length is not stored: zlib says how much it read). */
const inflateOne: Inflater = (buf, off, end) => {
  let inflated: { buffer: Buffer; engine: Inflate };
  try {
    inflated = inflateSync(buf.subarray(off, end), { info: true }) as unknown as typeof inflated;
  } catch (e) {
    throw broken(`zlib: ${(e as Error).message}`);
  }
  const { buffer, engine } = inflated;
  const data = Buffer.allocUnsafe(ROOM + buffer.length).subarray(ROOM);
  buffer.copy(data);
  return { data, used: engine.bytesWritten };
};

interface ZlibHandle {
  writeSync(flush: number, input: Buffer, inOff: number, inLen: number, out: Buffer, outOff: number, outLen: number): void;
  reset(): void;
  close(): void;
  onerror: (message: string) => void;
}

/**
 * The same, 4-5x faster: inflateSync builds a stream and a zlib context per call (~25 µs, a second
 * for 40,000 objects), so this drives one context of Node's zlib binding directly and resets it
 * between objects. That binding is internal: when it is not there as expected, null (use inflateOne).
 */
function zlibHandle(): Inflater | null {
  const stream = createInflate() as unknown as { _handle?: ZlibHandle; _writeState?: Uint32Array };
  const handle = stream._handle;
  const state = stream._writeState; // [output bytes left, input bytes left] after each write
  if (!handle || typeof handle.writeSync !== 'function' || typeof handle.reset !== 'function' || !(state instanceof Uint32Array)) return null;
  let failed: string | null = null;
  handle.onerror = (message) => { failed = message; };
  // Objects are inflated into slabs of a megabyte rather than a buffer each: 40,000 small buffers
  // cost more in allocation and garbage collection than inflating them does.
  let slab = Buffer.alloc(0);
  let free = 0;
  const inflater: Inflater = (buf, off, end, size) => {
    const need = ROOM + size + 1; // one byte more, to see an object longer than it says
    if (slab.length - free < need) {
      slab = Buffer.allocUnsafeSlow(Math.max(need, SLAB));
      free = 0;
    }
    handle.writeSync(zlibConstants.Z_FINISH, buf, off, end - off, slab, free + ROOM, size + 1);
    if (failed !== null) throw broken(`zlib: ${failed}`);
    const used = end - off - state[1]!;
    const data = slab.subarray(free + ROOM, free + ROOM + size + 1 - state[0]!);
    free += ROOM + data.length;
    handle.reset();
    return { data, used };
  };
  inflater.close = () => handle.close();
  return inflater;
}

/** Apply every delta (bases first, chains walked without recursion) and hash every object. */
function resolve(kinds: Uint8Array, datas: Buffer[], bases: Array<number | string>): Map<string, GitObject> {
  const objects = new Map<string, GitObject>();
  const byOid = new Map<string, number>(); // only REF_DELTA bases are looked up by oid
  const refDeltas = bases.some((b) => typeof b === 'string');
  const add = (i: number) => {
    const type = TYPES[kinds[i]!]!;
    const data = datas[i]!;
    const head = `${type} ${data.length}\0`;
    const whole = Buffer.from(data.buffer, data.byteOffset - head.length, head.length + data.length);
    whole.write(head, 0, 'latin1');
    const oid = hash('sha1', whole, 'hex');
    objects.set(oid, { type, data });
    if (refDeltas) byOid.set(oid, i);
  };
  for (let i = 0; i < kinds.length; i++) if (kinds[i]! <= 4) add(i);
  packStats.packs++;
  packStats.objects += kinds.length;
  for (let pending = kinds.length - objects.size, progress = true; pending > 0 && progress;) {
    progress = false;
    for (let i = 0; i < kinds.length; i++) {
      if (kinds[i]! <= 4) continue;
      const chain: number[] = [];
      let j = i;
      while (j >= 0 && kinds[j]! > 4) {
        if (chain.push(j) > kinds.length) throw broken('its deltas form a cycle');
        const base = bases[j]!;
        j = typeof base === 'number' ? base : byOid.get(base) ?? -1;
      }
      if (j < 0) continue; // a REF_DELTA base not resolved yet (or not in this pack)
      for (let k = chain.length - 1; k >= 0; k--, pending--) {
        const d = chain[k]!;
        if (kinds[d] === OFS_DELTA) packStats.ofsDeltas++;
        else packStats.refDeltas++;
        datas[d] = applyDelta(datas[j]!, datas[d]!);
        kinds[d] = kinds[j]!;
        add(d);
        j = d;
      }
      progress = true;
    }
  }
  if (objects.size < kinds.length) throw broken('a delta names a base that is not in the pack (a thin pack was never asked for)');
  return objects;
}

/** The object `delta` describes: copy ranges of `base` and insert literal bytes (git's delta format). The result has ROOM before it. */
export function applyDelta(base: Buffer, delta: Buffer): Buffer {
  let p = 0;
  const varint = () => {
    let v = 0;
    for (let shift = 0, c = 0x80; c & 0x80; shift += 7) v += ((c = delta[p++]!) & 0x7f) * 2 ** shift;
    return v;
  };
  if (varint() !== base.length) throw broken('a delta does not fit its base');
  const out = Buffer.allocUnsafe(ROOM + varint()).subarray(ROOM);
  let o = 0;
  while (p < delta.length) {
    const c = delta[p++]!;
    if (c & 0x80) {
      let from = 0;
      let n = 0;
      if (c & 0x01) from = delta[p++]!;
      if (c & 0x02) from += delta[p++]! * 0x100;
      if (c & 0x04) from += delta[p++]! * 0x10000;
      if (c & 0x08) from += delta[p++]! * 0x1000000;
      if (c & 0x10) n = delta[p++]!;
      if (c & 0x20) n += delta[p++]! * 0x100;
      if (c & 0x40) n += delta[p++]! * 0x10000;
      if (n === 0) n = 0x10000;
      if (from + n > base.length || o + n > out.length) throw broken('a delta copies outside its base');
      o += base.copy(out, o, from, from + n);
    } else if (c !== 0) {
      if (p + c > delta.length || o + c > out.length) throw broken('a delta inserts past its end');
      o += delta.copy(out, o, p, p += c);
    } else throw broken('a delta has a reserved instruction');
  }
  if (o !== out.length) throw broken('a delta is shorter than it says');
  return out;
}
