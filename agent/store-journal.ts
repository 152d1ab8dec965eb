/**
 * The store's journal: an append-only file of JSON lines, one per record put or dropped since
 * the last snapshot (see store.ts). Only complete lines count: a crash in the middle of an
 * append leaves an incomplete last line, which is ignored and cut off before the next append.
 */
import { closeSync, fdatasyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import * as z from 'zod';
import { OwnedRecord } from '../schema/report.js';
import { fsyncDir } from './atomic.js';
import { corrupt, parseJson } from './store-snapshot.js';

const Entry = z.union([
  z.strictObject({ epoch: z.number().int().nonnegative(), put: OwnedRecord }),
  z.strictObject({ epoch: z.number().int().nonnegative(), drop: z.string() }),
]);
/** One journal line: a record put or an id dropped, after the snapshot of epoch `epoch`. */
export type Entry = z.infer<typeof Entry>;

export class Journal {
  private fd: number | null = null;
  /** Bytes up to the end of the last complete line, when the file ends in an incomplete one. */
  private tornAt: number | null = null;
  private count = 0;

  constructor(readonly path: string) {}

  /** Every complete line, checked; a line that is not an entry makes the whole store unreadable. */
  entries(): Entry[] {
    return this.lines().map(({ line, text }) => {
      const entry = Entry.safeParse(parseJson(text, `${this.path} line ${line}`));
      if (!entry.success) throw corrupt(`${this.path} line ${line}`, entry.error.issues[0]?.message ?? 'unexpected shape');
      return entry.data;
    });
  }

  /** Append `entry`; with `durable`, it is on disk when this returns. */
  add(entry: Entry, durable: boolean): void {
    this.append(JSON.stringify(entry), durable);
  }

  private lines(): Array<{ line: number; text: string }> {
    let bytes: Buffer;
    try {
      bytes = readFileSync(this.path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const end = bytes.lastIndexOf(0x0a) + 1;
    this.tornAt = end < bytes.length ? end : null;
    const texts = bytes.subarray(0, end).toString('utf8').split('\n').slice(0, -1);
    this.count += texts.length;
    return texts.map((text, i) => ({ line: i + 1, text }));
  }

  /** Whether the journal holds any line (read at open or appended since). */
  get appended(): boolean {
    return this.count > 0;
  }

  private append(text: string, durable: boolean): void {
    if (this.fd === null) this.openForAppend();
    writeSync(this.fd!, text + '\n');
    this.count += 1;
    if (durable) fdatasyncSync(this.fd!);
  }

  /** Forget every line (after a snapshot that holds them was written). */
  clear(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    this.count = 0;
    this.tornAt = null;
    try {
      unlinkSync(this.path);
    } catch {
      // there was none
    }
  }

  private openForAppend(): void {
    mkdirSync(dirname(this.path), { recursive: true });
    this.fd = openSync(this.path, 'a', 0o600);
    if (this.tornAt !== null) ftruncateSync(this.fd, this.tornAt);
    this.tornAt = null;
    fsyncDir(dirname(this.path)); // the journal's own name must survive a power cut before its lines matter
  }
}
