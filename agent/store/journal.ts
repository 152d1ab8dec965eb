/**
 * The store's journal: an append-only file of JSON lines, one per record put or dropped since
 * the last snapshot (see store/core.ts). Only complete lines count: a crash in the middle of an
 * append leaves an incomplete last line, which is ignored and cut off before the next append.
 */
import { closeSync, fdatasyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { fsyncDir } from '../atomic.js';
import type { Entry, StoreChecks } from './checks.js';
import { ChecksNeeded } from './errors.js';
import { parseJson } from './snapshot.js';

export type { Entry };

export class Journal {
  private fd: number | null = null;
  /** Bytes up to the end of the last complete line, when the file ends in an incomplete one. */
  private tornAt: number | null = null;
  private count = 0;

  constructor(readonly path: string) {}

  /** Every complete line, checked; a line that is not an entry makes the whole store unreadable. Without `checks`, any line throws ChecksNeeded. */
  entries(checks: StoreChecks | null): Entry[] {
    const lines = this.lines();
    if (lines.length > 0 && !checks) throw new ChecksNeeded(this.path);
    return lines.map(({ line, text }) => checks!.entry(parseJson(text, `${this.path} line ${line}`), `${this.path} line ${line}`));
  }

  /** Append `entry`; with `durable`, it is on disk when this returns. */
  add(entry: Entry, durable: boolean): void {
    this.append(JSON.stringify(entry), durable);
  }

  /** Append every entry with one write; with `durable`, all are on disk when this returns. */
  addAll(entries: Entry[], durable: boolean): void {
    this.append(entries.map((e) => JSON.stringify(e)).join('\n'), durable, entries.length);
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

  private append(text: string, durable: boolean, lines = 1): void {
    if (this.fd === null) this.openForAppend();
    writeFully(this.fd!, Buffer.from(text + '\n'));
    this.count += lines;
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

/** writeSync until every byte is written (a large append may be written in parts). */
function writeFully(fd: number, bytes: Buffer): void {
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
}
