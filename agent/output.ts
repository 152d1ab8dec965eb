/** How mesh-host prints results: one readable block per result, or JSON with --json. */
import type { ReportBody } from './report.js';
import type { PassResult } from './reconcile.js';
import type { HostState, OwnedEntry } from './commands/state.js';
import type { SelfTest } from './commands/self-test.js';
import type { NoopResult } from './commands/noop.js';
import { EXIT } from '../core/exit.js';
import { placed } from '../core/errors.js';
import { KEEP_DAYS } from './purged.js';

export function printPass(pass: PassResult, json: boolean): void {
  if (json) return void console.log(JSON.stringify({ ...pass.report, delivery: pass.delivery, sent: pass.sent, disconnected: pass.disconnected ?? null }));
  printBody(pass.report, false);
  if (pass.disconnected) console.log(`fleet unreachable: ${pass.disconnected}`);
  const says = { pushed: `report #${pass.report.sequence} pushed`, unchanged: 'nothing new to report since the last report', kept: 'report kept; it will be pushed when the fleet can be reached' };
  console.log(says[pass.delivery]);
}

export function printBody(body: ReportBody, json: boolean): void {
  if (json) return void console.log(JSON.stringify(body));
  const at = body.commit ? ` at ${body.commit.slice(0, 12)}` : '';
  const c = body.counts;
  // One write for the whole block: a line each was a write(2) each, 40 ms for a first apply of 1,000 files.
  const lines = [`${body.outcome}${at}${c ? `: ${c.changed} changed (${c.drift} drift), ${c.unchanged} unchanged, ${c.failed} failed` : ''}`];
  for (const e of body.errors) lines.push(`  error: ${placed(e)}`);
  for (const r of body.resources) {
    if (r.result === 'unchanged') continue;
    lines.push(`  ${r.result.padEnd(9)} ${r.id}${r.changes?.length ? ` (${r.changes.join('; ')})` : ''}${r.error ? `: ${r.error}` : ''}`);
  }
  console.log(lines.join('\n'));
}

/**
 * Print what --noop found and return the exit code (DESIGN.md's table): 1 when the plan itself fails (a
 * declaration that does not load, a state that cannot be read, a pre-flight problem), 4 when something
 * would change, 0 when nothing would.
 */
export function printNoop(result: NoopResult, json: boolean): number {
  const p = result.preview;
  const code = !p ? EXIT.failed : p.problems.length > 0 ? EXIT.failed : p.lines.length > 0 ? EXIT.notYet : EXIT.done;
  if (json) {
    console.log(JSON.stringify({ noop: true, commit: result.commit, notes: result.notes, changes: p?.lines ?? [], inSync: p?.inSync ?? 0, problems: p?.problems ?? [] }));
    return code;
  }
  const at = result.commit ? ` at ${result.commit.slice(0, 12)}` : '';
  const summary = !p ? 'nothing to plan: no commit has been accepted yet' : `${p.lines.length} would change, ${p.inSync} in sync${p.problems.length ? `, ${p.problems.length} problem${p.problems.length === 1 ? '' : 's'}` : ''}`;
  const out = [`noop${at} (nothing was changed): ${summary}`];
  for (const note of result.notes) out.push(`  note: ${note}`);
  for (const problem of p?.problems ?? []) out.push(`  problem   ${problem.id ? `${problem.id}: ` : ''}${problem.message}`);
  for (const line of p?.lines ?? []) {
    out.push(`  would ${line.action.padEnd(8)} ${line.id} (${line.changes.join('; ')})${line.drift ? ' [drift]' : ''}`);
    for (const d of line.diff ?? []) out.push(`      ${d}`);
  }
  console.log(out.join('\n')); // one write, as printBody
  return code;
}

export function printState(s: HostState, json: boolean): void {
  if (json) return void console.log(JSON.stringify(s));
  console.log(`${s.state}: ${s.reason}`);
  if (s.node) console.log(`node ${s.node} generation ${s.generation}, fleet ${s.url}`);
  console.log(`host version ${s.hostVersion}`);
  console.log(`facts: ${Object.entries(s.facts).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  console.log(`last applied: ${s.lastApplied ? `${s.lastApplied.commit.slice(0, 12)} at ${s.lastApplied.at}` : 'never'}`);
  if (s.unsentReport) console.log('a report is waiting to be sent');
  console.log(`owned (${s.owned.length}):`);
  for (const o of s.owned) console.log(`  ${o.id}${ownedNote(o)}`);
  for (const id of s.pending) console.log(`pending: ${id} (a change it watches calls for it; it runs on the next pass)`);
  const p = s.purged;
  if (p) console.log(`purged: ${p.files} file${p.files === 1 ? '' : 's'} (${sizeOf(p.bytes)}) kept in ${p.dir}, the oldest from ${p.oldest}; each is removed ${KEEP_DAYS} days after it was purged`);
}

function sizeOf(bytes: number): string {
  return bytes < 1024 ? `${bytes} bytes` : bytes < 2 ** 20 ? `${(bytes / 1024).toFixed(1)} KB` : `${(bytes / 2 ** 20).toFixed(1)} MB`;
}

/** Why an owned resource is not verified yet: its last change failed, or the host stopped in the middle of it (or either, when no report says). */
function ownedNote(o: OwnedEntry): string {
  if (o.state !== 'intent') return '';
  // Most errors of a change say it is retried (apt's, a skipped change's): said once.
  if (o.error !== undefined) return ` (last change failed: ${o.error}${o.error.endsWith('the next pass tries again') ? '' : '; it is retried on the next pass'})`;
  if (o.reportless) return ' (its last change did not complete: it failed, or the host stopped in it; the next pass tries again)';
  return ' (change in progress when the host stopped)';
}

export function printSelfTest(r: SelfTest, json: boolean): void {
  if (json) return void console.log(JSON.stringify(r));
  console.log(`mesh-host ${r.version}`);
  for (const c of r.checks) console.log(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.check}: ${c.detail}`);
}
