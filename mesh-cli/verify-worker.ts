/**
 * The body of a verify thread of `mesh-cli status` (verify-pool.ts). scripts/build.mjs bundles
 * this file on its own, with only the signature code (agent/verify-claims.ts), and puts it in
 * mesh-cli.mjs as a string that the pool starts each thread from: a thread that loaded all of
 * mesh-cli (zod schemas, YAML, commander) spent ~0.1 s of CPU doing so.
 * Every chunk is posted to every thread; a thread verifies only the chunks it claims first.
 */
import { parentPort } from 'node:worker_threads';
import { verifyClaims, type VouchMemo } from '../core/report/claims.js';
import { BY_THREAD, claim } from './verify-claim.js';
import { unpackJobs } from './verify-chunk.js';
import type { VerifyMessage, VerifyAnswer } from './verify-pool.js';

const memo: VouchMemo = new Set();
parentPort!.on('message', (m: VerifyMessage) => {
  if ('vouched' in m) {
    for (const v of m.vouched) memo.add(v);
    return;
  }
  if (!claim(m.claim, BY_THREAD)) return; // another thread, or the caller, has it
  const started = performance.now();
  const before = memo.size;
  const results = unpackJobs(m).map((j) => verifyClaims(j.node, j.status, j.sig, j.claims, j.identity, memo));
  parentPort!.postMessage({ id: m.id, results, vouched: memo.size > before ? [...memo].slice(before) : [], ms: performance.now() - started } satisfies VerifyAnswer);
});
