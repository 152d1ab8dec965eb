/**
 * `mesh-cli status`: one `git fetch` of main and every report branch, every report verified
 * against the identity chain on main, one row per node. Nothing here trusts a report
 * because of where it is: a report whose signature does not verify is shown as such,
 * never as applied.
 */
import type { Report } from '../../schema/report.js';
import { NodeIdentity } from '../../schema/fleet.js';
import { loadYaml } from '../../schema/load.js';
import { verifyReport, type SignatureVerdict } from '../../agent/verify-report.js';
import { catFiles, type Fleet } from '../fleet.js';

export interface NodeStatus {
  node: string;
  lastContact: string | null;
  commit: string | null;
  outcome: Report['outcome'] | null;
  hostVersion: string | null;
  signature: SignatureVerdict;
  generation: number | null;
  sequence: number | null;
  reason?: string;
  errors?: string[];
  /** What a report whose signature is not valid claims; never shown as the node's state. */
  claimed?: { lastContact: string; commit: string | null; outcome: Report['outcome'] };
}

const REPORTS = 'refs/remotes/origin/reports/';

/** Fetch reports and main from origin (unless `fetch` is false) and verify every node's last report. */
export async function fleetStatus(fleet: Fleet, opts: { fetch: boolean }): Promise<NodeStatus[]> {
  const main = fleet.config.mainBranch;
  if (opts.fetch) await fleet.git.fetch(['--prune', 'origin', `+refs/heads/${main}:refs/remotes/origin/${main}`, `+refs/heads/reports/*:${REPORTS}*`]);
  const mainRef = `refs/remotes/origin/${main}`;
  const reportNodes = (await fleet.git.raw(['for-each-ref', '--format=%(refname)', REPORTS])).split('\n').filter(Boolean).map((r) => r.slice(REPORTS.length));
  const declaredNodes = (await fleet.git.raw(['ls-tree', '-d', '--name-only', `${mainRef}:nodes`]).catch(() => '')).split('\n').filter(Boolean);
  const nodes = [...new Set([...declaredNodes, ...reportNodes])].sort();

  const specs = nodes.flatMap((n) => [`${mainRef}:nodes/${n}/node.yaml`, `${REPORTS}${n}:status.json`, `${REPORTS}${n}:status.json.sig`]);
  const blobs = await catFiles(fleet.dir, specs);
  const text = (spec: string) => blobs.get(spec)?.toString('utf8') ?? null;
  return nodes.map((node) => {
    const identityText = text(`${mainRef}:nodes/${node}/node.yaml`);
    const identity = identityText === null ? null : loadYaml(identityText, `nodes/${node}/node.yaml`, NodeIdentity);
    const verified = verifyReport(node, text(`${REPORTS}${node}:status.json`), text(`${REPORTS}${node}:status.json.sig`), identity?.ok ? identity.value : null);
    const r = verified.report;
    const failures = r?.errors.map((e) => (e.file ? `${e.file}:${e.line}:${e.col}: ${e.message}` : e.message)) ?? [];
    failures.push(...(r?.resources.filter((x) => x.result === 'failed').map((x) => `${x.id}: ${x.error}`) ?? []));
    const trusted = verified.signature === 'valid' ? r : undefined;
    return {
      node,
      lastContact: trusted?.observedAt ?? null,
      commit: trusted?.commit ?? null,
      outcome: trusted?.outcome ?? null,
      hostVersion: trusted?.hostVersion ?? null,
      signature: verified.signature,
      generation: trusted?.generation ?? null,
      sequence: trusted?.sequence ?? null,
      ...(verified.reason ? { reason: verified.reason } : {}),
      ...(trusted && failures.length ? { errors: failures } : {}),
      ...(r && !trusted ? { claimed: { lastContact: r.observedAt, commit: r.commit, outcome: r.outcome } } : {}),
    };
  });
}

/** The table a person reads: node, last contact with its age, commit, outcome, host version, signature. */
export function formatStatus(rows: NodeStatus[], now: Date): string {
  const table = [['NODE', 'LAST CONTACT', 'COMMIT', 'OUTCOME', 'HOST', 'SIGNATURE']];
  for (const r of rows) {
    const contact = r.lastContact ? `${r.lastContact.slice(0, 19)}Z (${age(now.getTime() - Date.parse(r.lastContact))} ago)` : r.claimed ? 'unknown' : 'never';
    const outcome = r.outcome ?? (r.claimed ? `(claims ${r.claimed.outcome}, unverified)` : 'no report');
    table.push([r.node, contact, r.commit?.slice(0, 12) ?? '-', outcome, r.hostVersion ?? '-', r.signature]);
  }
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const lines = table.map((row) => row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  for (const r of rows) {
    if (r.reason && r.signature !== 'valid') lines.push(`${r.node}: signature ${r.signature}: ${r.reason}`);
    if (r.signature === 'valid') for (const e of r.errors ?? []) lines.push(`${r.node}: ${e}`);
  }
  return lines.join('\n');
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}
