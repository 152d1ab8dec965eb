/**
 * `mesh-cli status --html FILE`: one self-contained page (no scripts, no external files) for
 * the people who would rather look than read: the fleet table with each node's last contact,
 * and the rollouts of the last commits on main that changed any declaration, as bars of
 * applied / failed / outstanding. Written as polyglot XHTML, so that any strict XML parser
 * can check it and any browser can show it.
 */
import type { Fleet } from '../fleet.js';
import { contact } from '../../core/duration.js';
import { mainRef } from '../reports.js';
import type { Rollout } from '../rollout.js';
import { affectedAt, rolloutAt } from './rollout.js';
import type { NodeStatus } from '../status/node-status.js';
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

/** The page for `nodes` (from fleetStatus), with the rollouts of the last commits on the fetched main. */
export async function fleetPage(fleet: Fleet, nodes: NodeStatus[], summary: string, now: Date): Promise<string> {
  const rollouts = await lastRollouts(fleet);
  const title = `mesh · ${fleet.config.name}`;
  return [
    '<!DOCTYPE html>',
    '<html xmlns="http://www.w3.org/1999/xhtml" lang="en">',
    `<head><meta charset="utf-8"/><title>${esc(title)}</title><style>${STYLE}</style></head>`,
    '<body>',
    `<h1>${esc(title)}</h1>`,
    `<p class="summary">${esc(summary)} <span class="when">as of ${esc(now.toISOString().slice(0, 19))}Z</span></p>`,
    '<h2>Rollouts of the last commits</h2>',
    rollouts.length === 0 ? '<p>No commit on main has changed a declaration yet.</p>' : rolloutTable(rollouts),
    '<h2>Nodes</h2>',
    nodeTable(nodes, now),
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

function rolloutTable(rollouts: CommitRollout[]): string {
  const rows = rollouts.map(({ commit, subject, date, rollout: r }) => {
    const total = r.affected.length;
    const part = (kind: string, names: string[]) =>
      names.length ? `<span class="${kind}" style="width:${((100 * names.length) / total).toFixed(2)}%" title="${esc(`${kind}: ${names.join(', ')}`)}">${names.length}</span>` : '';
    const bar = part('applied', r.applied.map((n) => n.node)) + part('failed', r.failed.map((n) => n.node)) + part('outstanding', r.outstanding.map((n) => n.node));
    const detail = [
      ...r.failed.map((f) => `${f.node} failed: ${f.reason}`),
      ...(r.outstanding.length ? [`outstanding: ${r.outstanding.map((o) => o.node).join(', ')}`] : []),
    ];
    return `<tr><td><code>${commit.slice(0, 12)}</code><br/><span class="when">${esc(date.slice(0, 19))}</span></td><td>${esc(subject)}</td><td><div class="bar">${bar}</div>${detail.map((d) => `<div class="detail">${esc(d)}</div>`).join('')}</td><td>${r.applied.length} applied, ${r.failed.length} failed, ${r.outstanding.length} outstanding of ${total}</td></tr>`;
  });
  return `<table class="rollouts">\n<tr><th>commit</th><th>subject</th><th>rollout</th><th>nodes</th></tr>\n${rows.join('\n')}\n</table>`;
}

function nodeTable(nodes: NodeStatus[], now: Date): string {
  const rows = nodes.map((n) => {
    const outcome = n.outcome ?? (n.claimed ? `claims ${n.claimed.outcome} (not verified)` : 'no report');
    const cls = n.signature !== 'valid' && n.signature !== 'missing' ? 'bad' : (n.outcome ?? 'none');
    const notes = [...(n.signature !== 'valid' && n.reason ? [n.reason] : []), ...(n.errors ?? [])];
    return `<tr class="${esc(cls)}"><td>${esc(n.node)}</td><td>${esc(contact(n.lastContact, now))}</td><td><code>${esc(n.commit?.slice(0, 12) ?? '-')}</code></td><td>${esc(outcome)}${notes.map((x) => `<div class="detail">${esc(x)}</div>`).join('')}</td><td>${esc(n.hostVersion ?? '-')}</td><td>${esc(n.signature)}</td></tr>`;
  });
  return `<table class="fleet">\n<tr><th>node</th><th>last contact</th><th>commit</th><th>outcome</th><th>host</th><th>signature</th></tr>\n${rows.join('\n')}\n</table>`;
}

/** Text and attribute values, escaped for XML and HTML alike. */
export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

const STYLE = [
  'body{font-family:system-ui,sans-serif;margin:2em;color:#222}',
  'table{border-collapse:collapse;width:100%;margin-bottom:2em}',
  'th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}',
  '.bar{display:flex;width:24em;height:1.2em;background:#eee;border-radius:3px;overflow:hidden}',
  '.bar span{color:#fff;font-size:.8em;text-align:center;line-height:1.5em}',
  '.applied{background:#2e7d32}.failed{background:#c62828}.outstanding{background:#9e9e9e}',
  'tr.failed td,tr.bad td{background:#fdecea}.detail{font-size:.85em;color:#555}.when{color:#777;font-size:.85em}',
].join('');
