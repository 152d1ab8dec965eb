/**
 * A plan for people: plain text for the terminal, and markdown ready to post as a
 * pull-request comment (GitHub allows 65,536 characters; a longer plan is cut between
 * node groups and says so). Nodes with exactly the same changes are shown once, so a role
 * change on 200 web servers is one block, not 200.
 */
import { trustLines } from './trust-review.js';
import type { FieldChange, ResourceChange, Trigger } from './declaration-diff.js';
import type { LastReport, NodePlan, PlanResult } from './plan-result.js';
import { contact } from '../core/duration.js';
import { placed } from '../core/errors.js';

const SIGN = { add: '+', change: '~', remove: '-' } as const;
const WORD = { add: 'added', change: 'changed', remove: 'removed' } as const;

/** Nodes with identical changes, in node order of their first member. */
export function groupNodes(nodes: NodePlan[]): NodePlan[][] {
  const groups = new Map<string, NodePlan[]>();
  for (const n of nodes) {
    const key = JSON.stringify([n.because, n.changes, n.reordered, n.triggers, n.problems?.map((p) => p.message), n.cannotPlan]);
    groups.set(key, [...(groups.get(key) ?? []), n]);
  }
  return [...groups.values()];
}

/** "mode "0644" → "0600", content" for a change; "mode "0644"" for an addition; what a removed command does (nothing). */
export function describeFields(c: ResourceChange): string {
  if (c.action === 'remove' && c.id.startsWith('command:')) return 'it owns nothing: removing it runs nothing';
  const value = (v: unknown) => JSON.stringify(v);
  const one = (f: FieldChange) => {
    if (f.field === 'content' || !('from' in f || 'to' in f)) return f.field; // content, or a body shown without its value (it reads a secret)
    if (c.action === 'add') return `${f.field} ${value(f.to)}`;
    if (!('from' in f)) return `${f.field} set to ${value(f.to)}`;
    if (!('to' in f)) return `${f.field} unset (was ${value(f.from)})`;
    return `${f.field} ${value(f.from)} → ${value(f.to)}`;
  };
  return c.fields.map(one).join(', ');
}

/** What a trigger does. */
const VERB = { run: 'runs', restart: 'restarts', 'reload-service': 'reloads', reload: 'daemon-reloads' } as const;

/** Why a trigger fires: "(file:/etc/app.ini changes)", its ids shown by `show`. */
function cause(t: Trigger, show: (id: string) => string = (id) => id): string {
  return `(${t.by.map(show).join(', ')} ${t.by.length === 1 ? 'changes' : 'change'})`;
}

function lastLine(l: LastReport, now: Date | null): string {
  if (l.signature === 'missing') return 'never reported';
  const when = now ? contact(l.lastContact, now) : l.lastContact ? `${l.lastContact.slice(0, 19)}Z` : 'unknown';
  const state = l.outcome ? `${l.outcome}${l.commit ? ` at ${l.commit.slice(0, 12)}` : ''}, last contact ${when}` : `last report's signature is ${l.signature}`;
  return `${state}${l.eligible === false ? ', INELIGIBLE' : ''}${l.reason ? ` (${l.reason})` : ''}`;
}

/** The plan as terminal text. */
export function formatPlanText(r: PlanResult, now: Date): string {
  const trust = r.trust ? trustLines(r.trust) : [];
  const lines = [...trust, ...(trust.length ? [''] : []), `plan ${r.base.slice(0, 12)}..${r.head.slice(0, 12)}: ${r.summary}`];
  for (const group of groupNodes(r.nodes)) {
    const g = group[0]!;
    lines.push('', `${group.map((n) => n.node).join(', ')}${g.because.length ? ` (changed: ${g.because.join(', ')})` : ''}`);
    if (g.problems) lines.push('  will fail: nothing applied (the host keeps its last good declaration and reports these)', ...g.problems.map((p) => `    ${placed(p)}`));
    if (g.cannotPlan) lines.push(`  cannot plan: no report yet; ${g.cannotPlan.join(', ')} read facts, shown here with placeholder facts`);
    for (const c of g.changes) {
      const fields = describeFields(c);
      lines.push(`  ${SIGN[c.action]} ${c.id}${fields ? `: ${fields}` : ''}`);
      for (const d of c.diff ?? []) lines.push(`      ${d}`);
    }
    for (const t of g.triggers ?? []) lines.push(`  → ${t.id} ${VERB[t.action]} ${cause(t)}`);
    if (g.reordered) lines.push('  resources reordered (the host applies them in declared order)');
  }
  if (r.nodes.length) lines.push('', 'last reports:', ...r.nodes.map((n) => `  ${n.node}  ${lastLine(n.last, now)}`));
  for (const note of r.notes) lines.push(`note: ${note}`);
  return lines.join('\n');
}

/** The plan as a pull-request comment; at most `limit` characters. */
export function formatPlanMarkdown(r: PlanResult, limit = 60_000): string {
  const trust = r.trust ? trustLines(r.trust) : [];
  const warning = trust.length ? ['> [!WARNING]', ...trust.map((l) => `> ${l.startsWith('  ') ? `- ${cell(l.trim())}` : `**${cell(l)}**`}`), ''] : [];
  const head = [`## mesh plan`, '', ...warning, `\`${r.base.slice(0, 12)}\` → \`${r.head.slice(0, 12)}\`: **${r.summary}**`, ...r.notes.map((n) => `\n> ${n}`)];
  if (r.nodes.length) {
    head.push('', '| node | last outcome | at commit | last contact | eligible |', '| --- | --- | --- | --- | --- |');
    for (const n of r.nodes) {
      const l = n.last;
      const outcome = l.signature === 'missing' ? 'never reported' : (l.outcome ?? `signature ${l.signature}`);
      const eligible = l.eligible === null ? '?' : l.eligible ? 'yes' : `**no**${l.reason ? `: ${cell(l.reason)}` : ''}`;
      head.push(`| ${n.node} | ${outcome} | ${l.commit ? `\`${l.commit.slice(0, 12)}\`` : '-'} | ${l.lastContact ? `${l.lastContact.slice(0, 19)}Z` : '-'} | ${eligible} |`);
    }
  }
  let text = head.join('\n');
  const groups = groupNodes(r.nodes);
  for (const [i, group] of groups.entries()) {
    const block = groupMarkdown(group);
    if (text.length + block.length > limit) {
      const rest = groups.slice(i).flat().map((n) => n.node);
      return `${text}\n\n… cut to fit a comment: ${rest.length} more node${rest.length === 1 ? '' : 's'} (${rest.join(', ')}); run \`mesh-cli plan\` to see all of it.`;
    }
    text += block;
  }
  return text;
}

function groupMarkdown(group: NodePlan[]): string {
  const g = group[0]!;
  const lines = ['', '', `### ${group.map((n) => n.node).join(', ')}${group.length > 1 ? ` (${group.length} nodes)` : ''}`];
  if (g.because.length) lines.push('', `Changed: ${g.because.map((f) => code(f)).join(', ')}`);
  if (g.problems) lines.push('', '**Will fail: nothing applied.** The declaration does not render at head; the host keeps its last good declaration and reports:', '', ...g.problems.map((p) => `- ${code(`${p.file}:${p.line}:${p.col}`)}: ${p.message}`));
  if (g.cannotPlan) lines.push('', `**Cannot plan: no report yet.** ${g.cannotPlan.map((id) => code(id)).join(', ')} read facts; shown here with placeholder facts.`);
  if (g.changes.length) lines.push('', ...g.changes.map((c) => `- **${WORD[c.action]}** ${code(c.id)}${describeFields(c) ? `: ${describeFields(c)}` : ''}`));
  if (g.triggers) lines.push('', ...g.triggers.map((t) => `- **${VERB[t.action]}** ${code(t.id)} ${cause(t, code)}`));
  if (g.reordered) lines.push('', 'Resources reordered (the host applies them in declared order).');
  for (const c of g.changes.filter((c) => c.diff)) lines.push('', `<details><summary>${escapeHtml(c.id)}</summary>`, '', ...fenced('diff', c.diff!), '', '</details>');
  return lines.join('\n');
}

function code(text: string): string {
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``;
}

function fenced(lang: string, lines: string[]): string[] {
  const longest = Math.max(2, ...lines.map((l) => Math.max(0, ...(l.match(/`+/g) ?? []).map((m) => m.length))));
  const fence = '`'.repeat(longest + 1);
  return [fence + lang, ...lines, fence];
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
