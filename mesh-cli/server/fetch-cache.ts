/**
 * Fetches of main answered from memory. When main moves, every host of the fleet fetches the same
 * step within a poll interval, and hosts that sat on the same commit send the same request body
 * byte for byte (the same wants, shallow lines and haves, from the same agent). Through git each
 * one is `git http-backend` starting `upload-pack`, whose pack the pack cache (pack-cache.ts)
 * copies; here the first answer git gives is kept whole, and the same request again is answered
 * with it without starting git at all.
 *
 * Only a request that cannot see anything but main is kept or answered: a protocol-v0/v1
 * `upload-pack` POST whose every `want` is main's tip as its ref files say now (main-stamp.ts),
 * which every user of the repository may read, and which ends its negotiation (`done`), so that
 * git's answer is the pack itself. Objects are never removed from under main, so the same request
 * always has the same right answer. A request in flight is shared: a second identical one waits
 * for the first answer instead of starting git too. Entries are kept by last use up to a size.
 */
import { pktLines } from '../../core/git/pkt-line.js';
import { mainTipFromFiles } from './main-stamp.js';

/** The largest request kept (a host's request is a few hundred bytes; a clone with many haves is not kept). */
export const MAX_FETCH_BODY = 16 * 1024;
/** The largest answer kept: a step of main is a few kB; a first clone of a big fleet is not kept. */
export const MAX_ANSWER = 4 * 1024 * 1024;
/** All answers together. */
const MAX_TOTAL = 64 * 1024 * 1024;

export interface CachedAnswer {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer;
}

export interface FetchCache {
  /** The key of `body` sent to the bare repository `dir`, or null when this request is not one to keep or answer. */
  key(dir: string, body: Buffer, protocol: string | undefined): string | null;
  /** The kept (or coming) answer for `key`; undefined when git must be asked. */
  get(key: string): Promise<CachedAnswer | null> | undefined;
  /** git is being asked for `key`: identical requests wait for `settle`'s answer (null: ask git yourselves). */
  pending(key: string): (answer: CachedAnswer | null) => void;
  stats(): { hits: number; entries: number; bytes: number };
}

export function openFetchCache(): FetchCache {
  const kept = new Map<string, CachedAnswer>(); // in order of last use
  const coming = new Map<string, Promise<CachedAnswer | null>>();
  let bytes = 0;
  let hits = 0;
  const keep = (key: string, answer: CachedAnswer): void => {
    if (answer.status !== 200 || answer.body.length > MAX_ANSWER || kept.has(key)) return;
    // git's answer carries no date or request-specific header, only the content type and no-cache ones.
    kept.set(key, answer);
    bytes += answer.body.length;
    for (const [old, a] of kept) {
      if (bytes <= MAX_TOTAL) break;
      kept.delete(old);
      bytes -= a.body.length;
    }
  };
  return {
    key: (dir, body, protocol) => (body.length <= MAX_FETCH_BODY && wantsOnlyMain(body, dir) ? `${dir}\0${protocol ?? ''}\0${body.toString('latin1')}` : null),
    get(key) {
      const answer = kept.get(key);
      if (answer) {
        kept.delete(key); // to the end: the most recently used
        kept.set(key, answer);
        hits++;
        return Promise.resolve(answer);
      }
      const wait = coming.get(key);
      if (wait) hits++;
      return wait;
    },
    pending(key) {
      let settle!: (answer: CachedAnswer | null) => void;
      coming.set(key, new Promise((resolve) => (settle = resolve)));
      let settled = false;
      return (answer) => {
        if (settled) return;
        settled = true;
        coming.delete(key);
        if (answer) keep(key, answer);
        settle(answer);
      };
    },
    stats: () => ({ hits, entries: kept.size, bytes }),
  };
}

/** Whether `body` is a v0/v1 upload-pack request that ends its negotiation and wants main's present tip alone. */
function wantsOnlyMain(body: Buffer, dir: string): boolean {
  const lines: string[] = [];
  try {
    for (const p of pktLines(body)) if (typeof p !== 'number') lines.push(p.toString('latin1').replace(/\n$/, ''));
  } catch {
    return false;
  }
  const wants = lines.filter((l) => l.startsWith('want ')).map((l) => l.slice(5, 45));
  if (wants.length === 0 || lines.at(-1) !== 'done' || lines.some((l) => l.startsWith('command=') || l.startsWith('want-ref '))) return false;
  const main = mainTipFromFiles(dir);
  return main !== null && main.oid !== null && wants.every((w) => w === main.oid);
}
