/**
 * `mesh-cli status` taken apart, for the bench: the same git fetch, the same blob extraction
 * (mesh-cli/fleet.ts catFiles), the same schemas and the same signature checks
 * (agent/verify-report.ts), each phase timed on its own, in wall time and in CPU time (this
 * process and the git processes it waited for). status.ts itself does not expose its phases,
 * so this harness calls the functions it calls, in its order.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { verifyReport } from '../agent/verify-report.js';
import { sameKey, verifySsh } from '../agent/sign/sshsig.js';
import { catFiles } from '../mesh-cli/fleet.js';
import { NodeIdentity } from '../schema/fleet.js';
import { loadYaml } from '../schema/load.js';
import { REPORT_NAMESPACE, Report, VOUCH_NAMESPACE, vouchPayload } from '../schema/report.js';

/** Where status.ts fetches report branches and main to. */
export const REPORTS = 'refs/remotes/origin/reports/';
export const MAIN = 'refs/remotes/origin/main';

/** Wall and CPU milliseconds of one phase. */
export interface Phase {
  ms: number;
  cpuMs: number;
}

/** Phases in order, with the node count and how many reports verified. */
export interface StatusPhases {
  nodes: number;
  valid: number;
  phases: Record<string, Phase>;
}

/** CPU milliseconds of this process and of the children it has waited for (git). */
export function cpuMs(): number {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100;
}

/** A recorder of phases: `await phase('name', () => work)`. */
export function phases(): { phases: Record<string, Phase>; phase<T>(name: string, work: () => T | Promise<T>): Promise<T> } {
  const out: Record<string, Phase> = {};
  return {
    phases: out,
    async phase(name, work) {
      const [t, c] = [performance.now(), cpuMs()];
      const result = await work();
      out[name] = { ms: performance.now() - t, cpuMs: cpuMs() - c };
      return result;
    },
  };
}

/** A synchronous git runner in `dir` that returns stdout. */
export function gitIn(dir: string): (...args: string[]) => string {
  return (...args) => execFileSync('git', args, { cwd: dir, maxBuffer: 256 * 1024 * 1024 }).toString();
}

/** Fetch and check every report in the operator checkout `dir` the way status.ts does, timing each phase. */
export async function statusPhases(dir: string): Promise<StatusPhases> {
  const git = gitIn(dir);
  const { phases: timed, phase } = phases();
  await phase('fetch', () => git('fetch', '--quiet', '--prune', 'origin', `+refs/heads/main:${MAIN}`, `+refs/heads/reports/*:${REPORTS}*`));
  const nodes = await phase('list', () => {
    const reported = git('for-each-ref', '--format=%(refname)', REPORTS).split('\n').filter(Boolean).map((r) => r.slice(REPORTS.length));
    const declared = git('ls-tree', '-d', '--name-only', `${MAIN}:nodes`).split('\n').filter(Boolean);
    return [...new Set([...declared, ...reported])].sort();
  });
  const text = (blobs: Map<string, Buffer | null>, spec: string) => blobs.get(spec)?.toString('utf8') ?? null;
  const identities = await phase('extract node.yaml', () => catFiles(dir, nodes.map((n) => `${MAIN}:nodes/${n}/node.yaml`)));
  const reports = await phase('extract reports', () => catFiles(dir, nodes.flatMap((n) => [`${REPORTS}${n}:status.json`, `${REPORTS}${n}:status.json.sig`])));
  const rows = nodes.map((n) => ({ n, identity: text(identities, `${MAIN}:nodes/${n}/node.yaml`), status: text(reports, `${REPORTS}${n}:status.json`), sig: text(reports, `${REPORTS}${n}:status.json.sig`) }));

  const parsed = await phase('parse', () =>
    rows.map((r) => {
      const identity = r.identity === null ? null : loadYaml(r.identity, `nodes/${r.n}/node.yaml`, NodeIdentity);
      const report = r.status === null ? null : loadYaml(r.status, `reports/${r.n}:status.json`, Report);
      return { ...r, identity: identity?.ok ? identity.value : null, report: report?.ok ? report.value : null };
    }),
  );
  const valid = await phase('verify', () => {
    let ok = 0;
    for (const r of parsed) {
      if (!r.report || !r.identity?.token || r.status === null || r.sig === null) continue;
      const sig = verifySsh(r.status, r.sig, REPORT_NAMESPACE);
      if (!sig.ok || !sameKey(sig.publicKey, r.report.nodeKey)) continue;
      const vouch = verifySsh(vouchPayload(r.n, r.report.generation, r.report.nodeKey), r.report.vouch, VOUCH_NAMESPACE);
      if (vouch.ok && sameKey(vouch.publicKey, r.identity.token.publicKey)) ok += 1;
    }
    return ok;
  });
  await phase('verifyReport() (parse + verify, as status.ts calls it)', () => parsed.forEach((r) => verifyReport(r.n, r.status, r.sig, r.identity)));
  return { nodes: nodes.length, valid, phases: timed };
}
