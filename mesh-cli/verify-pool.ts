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

/** In a worker thread started by `verifyAll`: answer its one batch and return true; elsewhere false. */
export function serveVerifyWorker(): boolean {
  const data = workerData as { meshVerify?: Batch } | null;
  if (isMainThread || !data?.meshVerify) return false;
  parentPort!.postMessage(verifyBatch(data.meshVerify));
  return true;
}

/** Verify every job (in order), adding the vouches checked to `memo`. */
export async function verifyAll(jobs: VerifyJob[], memo: VouchMemo): Promise<VerifiedReport[]> {
  const threads = Math.min(availableParallelism(), 8);
  const pool = jobs.length >= WORKER_THRESHOLD && (threads >= 2 || FORCED !== null);
  const answers = pool ? await onWorkers(jobs, memo, Math.max(2, threads)).catch((e: unknown) => (FORCED === null ? null : Promise.reject(e))) : null;
  const all = answers ?? [verifyBatch({ jobs, vouched: [...memo] })];
  for (const a of all) for (const v of a.vouched) memo.add(v);
  return all.flatMap((a) => a.results);
}

async function onWorkers(jobs: VerifyJob[], memo: VouchMemo, threads: number): Promise<Answer[]> {
  const size = Math.ceil(jobs.length / threads);
  const vouched = [...memo];
  const parts = Array.from({ length: threads }, (_, i) => jobs.slice(i * size, (i + 1) * size)).filter((p) => p.length > 0);
  return Promise.all(
    parts.map(
      (part) =>
        new Promise<Answer>((resolve, reject) => {
          const worker = new Worker(new URL(import.meta.url), { workerData: { meshVerify: { jobs: part, vouched } } });
          worker.once('message', (a: Answer) => {
            resolve(a);
            void worker.terminate();
          });
          worker.once('error', reject);
          worker.once('exit', (code) => reject(new Error(`verify worker exited with ${code}`)));
        }),
    ),
  );
}
