/**
 * `mesh-cli plan --base REV [--head REV]`: for review before merge, what changes on which
 * node. Both commits are read from git objects (no checkout); every node whose resolved
 * declaration differs gets its resource changes from the host's own planner, next to its
 * last verified report (outcome, last contact, eligibility), so a reviewer sees both what
 * will change and where it may not go well.
 */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { diffDeclarations } from '../declaration-diff.js';
import { changedNodes, nodePlaces, type NodeChange } from '../declarations.js';
import { currentRecipients } from '../secrets.js';
import { checkSecretRecipients } from '../validate-checks.js';
import { openFleet, type Fleet } from '../fleet.js';
import { formatPlanMarkdown, formatPlanText } from '../plan-format.js';
import type { LastReport, NodePlan, PlanResult } from '../plan-result.js';
import { eligibility, lastReports, reportedFacts, reportedNodes, trusted, tryFetchReports, type ShownReport } from '../reports.js';
import { commitTree, resolveCommit } from '../tree.js';
import { git } from '../git.js';
import { reviewTrust } from '../trust-review.js';

/** The plan from `base` to `head`, with each affected node's last report as fetched. */
export async function planFleet(fleet: Fleet, base: string, head: string, notes: string[] = [], workingTree = false): Promise<PlanResult> {
  const reported = await reportedNodes(fleet);
  if (reported.length === 0) notes.push('no reports fetched: last outcomes and eligibility are unknown');
  // Each node is rendered with the facts of its last verified report, as its host would render it.
  const factsOf = await reportedFacts(fleet);
  const changed = await changedNodes(fleet.dir, base, head, factsOf);
  const reports = await lastReports(fleet, changed.map((c) => c.node));
  const nodes = changed.map((c): NodePlan => {
    const resources = (r: typeof c.base) => (r.ok ? r.declaration.resources : []);
    // A head that does not render applies nothing: it removes nothing either, so it shows no changes, only why it will fail.
    const sensitive = new Set([c.base, c.head].flatMap((r) => (r.ok ? Object.keys(r.declaration.readSecrets ?? {}) : [])));
    const { changes, reordered, triggers } = c.head.ok ? diffDeclarations(resources(c.base), resources(c.head), sensitive) : { changes: [], reordered: false };
    const guessed = factsOf(c.node) ? [] : c.head.ok ? (c.head.declaration.readFacts ?? []) : [];
    return { node: c.node, because: c.because, changes, reordered, ...(triggers ? { triggers } : {}), ...(c.head.ok ? {} : { problems: c.head.problems }), ...(guessed.length ? { cannotPlan: guessed } : {}), last: lastOf(reports.get(c.node)!) };
  });
  notes.push(...(await secretNotes(fleet, head, changed)));
  return { base, head, trust: await reviewTrust(fleet.dir, base, head, workingTree), nodes, summary: summaryLine(nodes), notes };
}

/** What validate says about the secrets the changed nodes read at `head`: each node that could not read one, at the entry's file:line:col. */
async function secretNotes(fleet: Fleet, head: string, changed: NodeChange[]): Promise<string[]> {
  const reading = changed.filter((c) => c.head.ok && Object.keys(c.head.declaration.readSecrets ?? {}).length > 0);
  if (reading.length === 0) return [];
  const tree = await commitTree(fleet.dir, head);
  const places = await nodePlaces(tree);
  const reads = new Map(reading.flatMap((c) => {
    const place = places.get(c.node);
    const names = [...new Set(Object.values(c.head.ok ? (c.head.declaration.readSecrets ?? {}) : {}).flat())];
    return place ? [[c.node, { place, names }] as const] : [];
  }));
  const checked = await checkSecretRecipients(tree, reads, await currentRecipients(fleet));
  return [...checked.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`), ...checked.notes];
}

function lastOf(v: ShownReport): LastReport {
  const r = trusted(v);
  const e = eligibility(r);
  const reason = v.signature !== 'valid' ? v.reason : e.reason;
  return { outcome: r?.outcome ?? null, lastContact: r?.observedAt ?? null, commit: r?.commit ?? null, signature: v.signature, eligible: e.eligible, ...(reason ? { reason } : {}) };
}

/** "touches 37 nodes; 3 failed their last apply; 1 ineligible" (and what else a reviewer must know). */
export function summaryLine(nodes: NodePlan[]): string {
  const n = nodes.length;
  const failed = nodes.filter((p) => p.last.outcome === 'failed').length;
  const parts = [`touches ${n} node${n === 1 ? '' : 's'}`, `${failed} failed ${failed === 1 ? 'its' : 'their'} last apply`, `${nodes.filter((p) => p.last.eligible === false).length} ineligible`];
  const silent = nodes.filter((p) => p.last.signature === 'missing').length;
  if (silent) parts.push(`${silent} never reported`);
  const unverified = nodes.filter((p) => p.last.signature === 'invalid' || p.last.signature === 'revoked').length;
  if (unverified) parts.push(`${unverified} with a last report that does not verify`);
  const invalid = nodes.filter((p) => p.problems).length;
  if (invalid) parts.push(`${invalid} invalid at head`);
  return parts.join('; ');
}

/** Register `plan` on `program`. */
export function planCommand(program: Command): void {
  program.command('plan')
    .description('what changes on which node between two commits, per resource; --format markdown for a pull-request comment')
    .requiredOption('--base <rev>', 'the commit the change starts from (e.g. origin/main)')
    .option('--head <rev>', 'the commit with the change', 'HEAD')
    .option('--format <format>', 'text, markdown or json', formatOption, 'text')
    .option('--json', 'same as --format json')
    .option('--no-fetch', 'use the report branches already fetched')
    .action(async (o: { base: string; head: string; format: string; json?: boolean; fetch: boolean }) => {
      const fleet = await openFleet(process.cwd());
      const [base, head] = [await resolveCommit(fleet.dir, o.base), await resolveCommit(fleet.dir, o.head)];
      const notes: string[] = [];
      const fetchNote = o.fetch ? await tryFetchReports(fleet) : null;
      if (fetchNote) notes.push(fetchNote);
      const uncommitted = o.head === 'HEAD' ? await uncommittedNote(fleet.dir) : null;
      if (uncommitted) notes.push(uncommitted);
      const result = await planFleet(fleet, base, head, notes);
      const format = o.json ? 'json' : o.format;
      console.log(format === 'json' ? JSON.stringify(result) : format === 'markdown' ? formatPlanMarkdown(result) : formatPlanText(result, new Date()));
      if (result.nodes.some((n) => n.problems)) process.exitCode = 1;
    });
}

/**
 * A note when the checkout has changes to the fleet's files that HEAD does not (validate, which
 * reads the working tree, checked them): the plan is of HEAD, without them. Null when there are none.
 */
async function uncommittedNote(dir: string): Promise<string | null> {
  const lines = (await git(dir, ['status', '--porcelain', '--untracked-files=all', '--', 'mesh.yaml', 'nodes', 'roles']).catch(() => '')).split('\n').filter(Boolean);
  if (lines.length === 0) return null;
  const paths = lines.map((l) => l.slice(3));
  return `the working tree has changes not committed (${paths.slice(0, 5).join(', ')}${paths.length > 5 ? ` and ${paths.length - 5} more` : ''}): this plan is of HEAD, without them; commit them to plan them`;
}

function formatOption(text: string): string {
  if (!['text', 'markdown', 'json'].includes(text)) throw new InvalidArgumentError('use text, markdown or json');
  return text;
}
