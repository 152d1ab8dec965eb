/**
 * `mesh-cli status --html FILE`: one self-contained page (no external files) for the people
 * who would rather look than read: the rollouts of the last commits on main that changed any
 * declaration, as bars of applied / failed / outstanding as they were for each commit (a node's
 * later failure is a note on the old rollout, not its colour), and the fleet table with each
 * node's last contact. Problems are the loudest thing on the page, outstanding is calmer,
 * healthy rows are quiet; every text/background pair meets WCAG AA. A small inline script
 * writes each row's lowest contrast ratio into the page (`data-contrast`), so that a browser
 * test can check what a person sees; the page reads the same without it. Written as polyglot
 * XHTML, so that any strict XML parser can check it and any browser can show it.
 */
import type { Fleet } from '../fleet.js';
import { contact } from '../../core/duration.js';
import { mainRef } from '../reports.js';
import type { Rollout } from '../rollout.js';
import { affectedAt, rolloutAt } from './rollout.js';
import type { NodeStatus } from '../status/node-status.js';
import { CONTRAST_SCRIPT, STYLE } from '../status/page-style.js';
import { outageNote, type UnreachableShards } from '../status/shards.js';
import { git } from '../git.js';

/** How far back on main to look for commits that changed declarations, and how many rollouts to draw. */
const LOOK_BACK = 20;
const ROLLOUTS = 8;

interface CommitRollout {
  commit: string;
  subject: string;
  date: string;
  rollout: Rollout;
}

/** How loud a row is: a problem loudest, waiting calmer, ok and quiet in the background. */
type Tone = 'ok' | 'quiet' | 'waiting' | 'problem';

/** A report's outcome → its row's tone; an outcome not listed here is shown as a problem. */
const TONE: Record<string, Tone> = {
  applied: 'ok',
  retired: 'quiet',
  enrolled: 'waiting',
  failed: 'problem',
  untrusted: 'problem',
  ineligible: 'problem',
  unverified: 'problem',
};

/** The page for `nodes` (from fleetStatus), with the rollouts of the last commits on the fetched main, and a note for each report shard that did not answer. */
export async function fleetPage(fleet: Fleet, nodes: NodeStatus[], summary: string, now: Date, unreachable: UnreachableShards = []): Promise<string> {
  const rollouts = await lastRollouts(fleet);
  const title = `mesh · ${fleet.config.name}`;
  return [
    '<!DOCTYPE html>',
    '<html xmlns="http://www.w3.org/1999/xhtml" lang="en">',
    `<head><meta charset="utf-8"/><title>${esc(title)}</title><style>${STYLE}</style></head>`,
    '<body>',
    `<h1>${esc(title)}</h1>`,
    `<p class="summary">${esc(summary)} <span class="when">as of ${esc(now.toISOString().slice(0, 19))}Z</span></p>`,
    ...unreachable.map((s) => `<p class="detail waiting outage">${esc(outageNote(s))}</p>`),
    '<h2>Rollouts of the last commits</h2>',
    rollouts.length === 0 ? '<p>No commit on main has changed a declaration yet.</p>' : rolloutTable(rollouts),
    '<h2>Nodes</h2>',
    nodeTable(nodes, pendingNodes(rollouts), now),
    `<script>${CONTRAST_SCRIPT}</script>`,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

async function lastRollouts(fleet: Fleet): Promise<CommitRollout[]> {
  const log = await git(fleet.dir, ['log', '--first-parent', `-n${LOOK_BACK}`, '--format=%H%x09%cI%x09%s', mainRef(fleet), '--']).catch(() => '');
  const result: CommitRollout[] = [];
  for (const line of log.split('\n').filter(Boolean)) {
    const [commit, date, ...subject] = line.split('\t');
    const affected = await affectedAt(fleet, commit!);
    if (affected.length > 0) result.push({ commit: commit!, date: date!, subject: subject.join('\t'), rollout: await rolloutAt(fleet, commit!, affected) });
    if (result.length === ROLLOUTS) break;
  }
  return result;
}

/** The nodes still outstanding (or never reported) in the newest drawn rollout that affected them. */
function pendingNodes(rollouts: CommitRollout[]): Map<string, string> {
  const pending = new Map<string, string>();
  const judged = new Set<string>();
  for (const { commit, rollout: r } of rollouts) {
    for (const o of [...r.outstanding.map((x) => x.node), ...r.unknown]) if (!judged.has(o)) pending.set(o, commit);
    for (const node of r.affected) judged.add(node);
  }
  return pending;
}

function rolloutTable(rollouts: CommitRollout[]): string {
  const rows = rollouts.map(({ commit, subject, date, rollout: r }) => {
    const total = r.affected.length;
    const unverified = r.unverified.map((n) => n.node);
    const part = (kind: string, names: string[]) =>
      names.length ? `<span class="${kind}" style="width:${((100 * names.length) / total).toFixed(2)}%" title="${esc(`${kind}: ${names.join(', ')}`)}">${names.length}</span>` : '';
    const bar = part('applied', r.applied.map((n) => n.node)) + part('failed', r.failed.map((n) => n.node)) + part('unverified', unverified) + part('outstanding', r.outstanding.map((n) => n.node));
    const detail = [
      ...r.failed.map((f) => ['problem', `${f.node} failed: ${f.reason}`]),
      ...unverified.map((node) => ['problem', `${node} unverified: converged, but not every check could be made`]),
      ...(r.outstanding.length ? [['waiting', `outstanding: ${r.outstanding.map((o) => o.node).join(', ')}`]] : []),
      ...(r.unknown.length ? [['waiting', `never reported: ${r.unknown.join(', ')}`]] : []),
      ...r.applied.filter((a) => a.note).map((a) => ['note', `${a.node} applied it; ${a.note}`]),
    ];
    const counts = `${r.applied.length} applied, ${r.failed.length} failed, ${unverified.length ? `${unverified.length} unverified, ` : ''}${r.outstanding.length} outstanding of ${total}`;
    return `<tr><td><code>${commit.slice(0, 12)}</code><br/><span class="when">${esc(date.slice(0, 19))}</span></td><td>${esc(subject)}</td><td><div class="bar">${bar}</div>${detail.map(([cls, text]) => `<div class="detail ${cls}">${esc(text!)}</div>`).join('')}</td><td>${counts}</td></tr>`;
  });
  return `<table class="rollouts">\n<tr><th>commit</th><th>subject</th><th>rollout</th><th>nodes</th></tr>\n${rows.join('\n')}\n</table>`;
}

function nodeTable(nodes: NodeStatus[], pending: Map<string, string>, now: Date): string {
  const rows = nodes.map((n) => {
    const outcome = n.outcome ?? (n.claimed ? `claims ${n.claimed.outcome} (not verified)` : n.away ? 'unknown: its shard did not answer' : 'no report');
    const notes = [...(n.signature !== 'valid' && n.reason ? [n.reason] : []), ...(n.chain !== 'ok' ? [`report chain ${n.chain}`] : []), ...(n.errors ?? []), ...(n.unchecked ?? []).map((u) => `not checked: ${u}`)];
    const own = tone(n);
    const waitingFor = own === 'problem' || own === 'quiet' ? undefined : pending.get(n.node);
    if (waitingFor) notes.push(`outstanding: has not applied ${waitingFor.slice(0, 12)} yet`);
    const cls = `${waitingFor ? 'waiting' : own} ${n.outcome ?? 'none'}`;
    return `<tr class="${esc(cls)}"><td>${esc(n.node)}</td><td>${esc(contact(n.lastContact, now))}</td><td><code>${esc(n.commit?.slice(0, 12) ?? '-')}</code></td><td>${esc(outcome)}${notes.map((x) => `<div class="detail">${esc(x)}</div>`).join('')}</td><td>${esc(n.hostVersion ?? '-')}</td><td>${esc(n.signature)}</td></tr>`;
  });
  return `<table class="fleet">\n<tr><th>node</th><th>last contact</th><th>commit</th><th>outcome</th><th>host</th><th>signature</th></tr>\n${rows.join('\n')}\n</table>`;
}

/** A node's tone: revoked is quiet (it no longer counts); a report that does not verify or a broken chain is a problem whatever it claims; no report yet is waiting. */
function tone(n: NodeStatus): Tone {
  if (n.signature === 'revoked') return 'quiet';
  if (n.signature === 'invalid' || n.chain !== 'ok') return 'problem';
  return n.outcome === null ? 'waiting' : (TONE[n.outcome] ?? 'problem');
}

/** Text and attribute values, escaped for XML and HTML alike. */
export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

