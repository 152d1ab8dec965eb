/**
 * Verifying many reports at once on worker threads, one per core. A report costs an ed25519
 * check (~0.2 ms on the 2-core machine) and a schema check: at 10,000 nodes that is seconds of
 * CPU that status can spread over every core. The workers run this same bundle (mesh-cli's
 * main.ts hands a worker thread to `serveVerifyWorker` before it parses any command line) and
 * call the very `verifyReport` the host and enrolment use, so no verdict depends on where it
 * was made. Small batches, and a bundle that cannot start workers, are verified in place.
 */
import { availableParallelism } from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { verifyReport, type VerifiedReport, type VouchMemo } from '../agent/verify-report.js';
import type { NodeIdentity } from '../schema/fleet.js';

/** One report to verify: its node, status.json and signature texts, and the node's identity on main. */
export interface VerifyJob {
  node: string;
  status: string | null;
  sig: string | null;
  identity: NodeIdentity | null;
}

interface Batch {
  jobs: VerifyJob[];
  vouched: string[];
}

interface Answer {
  results: VerifiedReport[];
  vouched: string[];
}

/**
 * Below this many reports, starting workers costs more than it saves. MESH_VERIFY_POOL_FROM
 * lowers it (tests use it so that the worker path of the built bundle is exercised), and then
 * a worker that fails is an error instead of a quiet fallback to verifying in place.
 */
const FORCED = process.env.MESH_VERIFY_POOL_FROM ? Number(process.env.MESH_VERIFY_POOL_FROM) : null;
const WORKER_THRESHOLD = FORCED ?? 256;

function verifyBatch(batch: Batch): Answer {
  const memo: VouchMemo = new Set(batch.vouched);
  const before = memo.size;
  const results = batch.jobs.map((j) => verifyReport(j.node, j.status, j.sig, j.identity, memo));
  return { results, vouched: memo.size > before ? [...memo].slice(before) : [] };
}

/** In a worker thread started by a pool: answer each batch posted to it and return true; elsewhere false. */
export function serveVerifyWorker(): boolean {
  const data = workerData as { meshVerify?: boolean } | null;
  if (isMainThread || !data?.meshVerify) return false;
  parentPort!.on('message', (batch: Batch) => {
    const t = performance.now();
    // The parsed reports stay here: the index parses its own copy while this thread verifies.
    const a = verifyBatch(batch);
    for (const r of a.results) delete r.report;
    if (process.env.MESH_TIMINGS) process.stderr.write(`worker batch ${batch.jobs.length} in ${(performance.now() - t).toFixed(0)} ms\n`);
    parentPort!.postMessage(a);
  });
  return true;
}

/** Worker threads that load this bundle now, so that they are ready when the reports are. */
export interface VerifyPool {
  /** Verify every job (in order), adding the vouches checked to `memo`. */
  verify(jobs: VerifyJob[], memo: VouchMemo): Promise<VerifiedReport[]>;
  close(): void;
}

/** A pool for about `expected` reports: threads only when that many are worth them. */
export function verifyPool(expected: number): VerifyPool {
  const threads = Math.max(2, Math.min(availableParallelism(), 8));
  const wanted = expected >= WORKER_THRESHOLD && (availableParallelism() >= 2 || FORCED !== null);
  let workers: Worker[] | null = null;
  try {
    workers = wanted ? Array.from({ length: threads }, () => new Worker(new URL(import.meta.url), { workerData: { meshVerify: true } })) : null;
  } catch (e) {
    if (FORCED !== null) throw e;
  }
  const close = () => workers?.forEach((w) => void w.terminate());
  return {
    close,
    async verify(jobs, memo) {
      const pooled = workers && jobs.length >= WORKER_THRESHOLD ? await onWorkers(workers, jobs, memo).catch((e: unknown) => (FORCED === null ? null : Promise.reject(e))) : null;
      const all = pooled ?? [verifyBatch({ jobs, vouched: [...memo] })];
      for (const a of all) for (const v of a.vouched) memo.add(v);
      return all.flatMap((a) => a.results);
    },
  };
}

function onWorkers(workers: Worker[], jobs: VerifyJob[], memo: VouchMemo): Promise<Answer[]> {
  const size = Math.ceil(jobs.length / workers.length);
  const vouched = [...memo];
  return Promise.all(
    workers.map(
      (worker, i) =>
        new Promise<Answer>((resolve, reject) => {
          const part = jobs.slice(i * size, (i + 1) * size);
          if (part.length === 0) return resolve({ results: [], vouched: [] });
          const fail = (e: unknown) => reject(e instanceof Error ? e : new Error(`verify worker exited with ${String(e)}`));
          worker.once('error', fail);
          worker.once('exit', fail);
          worker.once('message', (a: Answer) => {
            worker.off('error', fail);
            worker.off('exit', fail);
            resolve(a);
          });
          worker.postMessage({ jobs: part, vouched });
        }),
    ),
  );
}
