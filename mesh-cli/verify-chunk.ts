/**
 * A chunk of reports as the verify pool posts it to its threads (verify-pool.ts, verify-worker.ts):
 * the reports' texts in one SharedArrayBuffer (posting it copies nothing, once per thread) and the
 * rest as one JSON string. Cloning 250 jobs' objects for each post cost the caller ~10 µs a report
 * (docs/scale.md, session 13); a string is copied whole. Every field of a job is plain JSON
 * (names, numbers, keys as text). Apart from verify-pool.ts so that the thread's bundle stays small.
 */
import type { IdentityKeys, ReportClaims } from '../core/report/claims.js';

/** One report to verify: its node, status.json (already parsed into `claims`) and signature as read, and the token keys of its node.yaml on main. */
export interface VerifyJob {
  node: string;
  status: Uint8Array;
  sig: Uint8Array | null;
  claims: ReportClaims;
  identity: IdentityKeys | null;
}

/** A chunk's jobs in order, each [node, claims, identity, status length, signature length or -1], its texts in that order in `bytes`. */
export interface PackedJobs {
  jobs: string;
  bytes: Uint8Array;
}

type PackedJob = [node: string, claims: ReportClaims, identity: IdentityKeys | null, statusLength: number, sigLength: number];

export function packJobs(jobs: VerifyJob[]): PackedJobs {
  let size = 0;
  for (const j of jobs) size += j.status.byteLength + (j.sig?.byteLength ?? 0);
  const bytes = new Uint8Array(new SharedArrayBuffer(size));
  let at = 0;
  const meta = jobs.map((j): PackedJob => {
    bytes.set(j.status, at);
    at += j.status.byteLength;
    if (j.sig) bytes.set(j.sig, at);
    at += j.sig?.byteLength ?? 0;
    return [j.node, j.claims, j.identity, j.status.byteLength, j.sig ? j.sig.byteLength : -1];
  });
  return { jobs: JSON.stringify(meta), bytes };
}

/** The jobs of a packed chunk, their texts views of its shared bytes. */
export function unpackJobs({ jobs, bytes }: PackedJobs): VerifyJob[] {
  let at = 0;
  return (JSON.parse(jobs) as PackedJob[]).map(([node, claims, identity, statusLength, sigLength]) => {
    const status = bytes.subarray(at, (at += statusLength));
    const sig = sigLength < 0 ? null : bytes.subarray(at, (at += sigLength));
    return { node, status, sig, claims, identity };
  });
}
