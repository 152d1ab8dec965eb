/**
 * Verifying many reports at once on worker threads, one per spare core. A report costs an ed25519
 * check (~0.12-0.15 ms on the 2-core machine): at 10,000 nodes that is seconds of CPU that status
 * spreads over every core. The threads run verify-worker.ts, which the build puts in mesh-cli.mjs
 * as a string, and call the very `verifyClaims` that `verifyReport` (hosts, enrolment) is made of,
 * so no verdict depends on where it was made.
 *
 * Reports are handed over in chunks as the caller reads them out of the fetched pack, so the
 * threads verify while the rest is still being read. Every chunk is posted to every thread at
 * once, its texts in one SharedArrayBuffer (so posting it copies them once, not once a thread)
 * and the rest as one JSON string (verify-chunk.ts), with a claim word: whoever claims a chunk first verifies it, and the others skip it. A thread
 * therefore never waits for the caller to hand it the next chunk (the caller's thread is busy
 * reading packs and writing files for up to a few hundred ms at a time), and the caller, once it
 * has nothing else to do, claims chunks from the back of the queue while the threads take them
 * from the front. Small runs, and a bundle that cannot start workers, are verified in place.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { BY_CALLER, claim } from './verify-claim.js';
import { packJobs, type PackedJobs, type VerifyJob } from './verify-chunk.js';
import { verifyClaims, type Verdict, type VouchMemo } from '../core/report/claims.js';

export type { Verdict } from '../core/report/claims.js';

export type { VerifyJob } from './verify-chunk.js';

/**
 * What the pool posts to a thread: the vouches already checked (first), then chunks of jobs
 * (packed, verify-chunk.ts), each with its claim word (an Int32Array of one element on shared
 * memory: 0 while nobody has it).
 */
export type VerifyMessage = { vouched: string[] } | ({ id: number; claim: Int32Array } & PackedJobs);

/** A thread's answer to a chunk it claimed: verdicts in order, the vouches it checked, and the time it took. */
export interface VerifyAnswer {
  id: number;
  results: Verdict[];
  vouched: string[];
  ms: number;
}

/** Time spent verifying, summed over every thread (MESH_TIMINGS prints it), and how many reports the calling thread verified itself. */
export const verifyStats = { ms: 0, here: 0 };

/** verify-worker.ts bundled, set by scripts/build.mjs; undefined when running from source (then verify in place). */
declare const __MESH_VERIFY_WORKER__: string | undefined;
const WORKER_SOURCE = typeof __MESH_VERIFY_WORKER__ === 'string' ? __MESH_VERIFY_WORKER__ : null;

/**
 * Below this many reports, starting workers costs more than it saves. MESH_VERIFY_POOL_FROM
 * lowers it (tests use it so that the worker path of the built bundle is exercised), and then
 * a worker that fails is an error instead of a quiet fallback to verifying in place.
 */
const FORCED = process.env.MESH_VERIFY_POOL_FROM ? Number(process.env.MESH_VERIFY_POOL_FROM) : null;
const WORKER_THRESHOLD = FORCED ?? 256;
/** MESH_VERIFY_THREADS sets how many threads (default: one fewer than the cores, at least one). */
const THREADS = Number(process.env.MESH_VERIFY_THREADS) || null;

/** Verify `jobs` with `memo`; the vouches newly checked are added to it and returned. */
function verifyAll(jobs: VerifyJob[], memo: VouchMemo): { results: Verdict[]; vouched: string[] } {
  const started = performance.now();
  const before = memo.size;
  const results = jobs.map((j) => verifyClaims(j.node, j.status, j.sig, j.claims, j.identity, memo));
  verifyStats.ms += performance.now() - started;
  verifyStats.here += jobs.length;
  return { results, vouched: memo.size > before ? [...memo].slice(before) : [] };
}

/** Threads that load this bundle as soon as the pool is made, so that they are ready when the reports are. */
export interface VerifyPool {
  /** Verify `jobs` (verdicts in their order); may be called again before an earlier call settles. Vouches checked are added to the pool's memo. */
  verify(jobs: VerifyJob[]): Promise<Verdict[]>;
  /** Verify here, on the calling thread, what no thread has taken yet (for when the caller has nothing else to do). */
  drain(): Promise<void>;
  close(): void;
}

interface Chunk {
  jobs: VerifyJob[];
  claim: Int32Array;
  resolve: (r: Verdict[]) => void;
  reject: (e: Error) => void;
}

/** A pool for about `expected` reports, with the vouches already checked in `memo` (which it adds to). */
export function verifyPool(expected: number, memo: VouchMemo): VerifyPool {
  const wanted = WORKER_SOURCE !== null && expected >= WORKER_THRESHOLD && (availableParallelism() >= 2 || FORCED !== null);
  let workers: Worker[] = [];
  try {
    // One core is the caller's: it reads the reports out of the packs, then verifies what is left.
    if (wanted) workers = Array.from({ length: THREADS ?? Math.max(1, Math.min(availableParallelism() - 1, 8)) }, () => new Worker(WORKER_SOURCE!, { eval: true }));
  } catch (e) {
    if (FORCED !== null) throw e;
  }
  if (workers.length === 0) return { verify: async (jobs) => verifyAll(jobs, memo).results, drain: async () => undefined, close: () => undefined };

  const known = [...memo];
  for (const w of workers) w.postMessage({ vouched: known } satisfies VerifyMessage);
  /** Chunks not answered yet, by id (in the order they were posted). */
  const pending = new Map<number, Chunk>();
  let next = 0;
  let failed: Error | null = null;

  /** Verify chunk `id` here if no thread has claimed it; false when one has. */
  const claimHere = (id: number, chunk: Chunk): boolean => {
    if (!claim(chunk.claim, BY_CALLER)) return false;
    pending.delete(id);
    chunk.resolve(verifyAll(chunk.jobs, memo).results);
    return true;
  };
  const fail = (e: unknown) => {
    failed ??= e instanceof Error ? e : new Error(`a verify worker exited with ${String(e)}`);
    for (const [id, chunk] of pending) {
      pending.delete(id);
      // Without workers the reports are still verified, in place, unless a test forced the pool.
      if (FORCED !== null) chunk.reject(failed);
      else chunk.resolve(verifyAll(chunk.jobs, memo).results);
    }
  };
  for (const w of workers) {
    w.on('message', (a: VerifyAnswer) => {
      verifyStats.ms += a.ms;
      for (const v of a.vouched) memo.add(v);
      const chunk = pending.get(a.id);
      pending.delete(a.id);
      chunk?.resolve(a.results);
    });
    w.once('error', fail);
    w.once('exit', (code) => (pending.size > 0 ? fail(code) : undefined));
  }
  return {
    verify(jobs) {
      if (jobs.length === 0) return Promise.resolve([]);
      if (failed) return FORCED !== null ? Promise.reject(failed) : Promise.resolve(verifyAll(jobs, memo).results);
      return new Promise((resolve, reject) => {
        const id = next++;
        const claim = new Int32Array(new SharedArrayBuffer(4));
        pending.set(id, { jobs, claim, resolve, reject });
        const message = { id, claim, ...packJobs(jobs) } satisfies VerifyMessage;
        for (const w of workers) w.postMessage(message);
      });
    },
    async drain() {
      // From the newest chunk back (the threads take the oldest first), with the threads' answers in between.
      const unclaimed = () => [...pending].reverse().find(([, chunk]) => Atomics.load(chunk.claim, 0) === 0);
      for (let open = unclaimed(); open; open = unclaimed()) {
        if (claimHere(...open)) await new Promise(setImmediate);
      }
    },
    close: () => {
      for (const w of workers) {
        w.removeAllListeners('exit');
        void w.terminate();
      }
    },
  };
}
