/**
 * `mesh-host run --once --noop`: the pass this machine would make now, changing nothing. Main is
 * polled and fetched as a pass does (only the local git object cache may change) and checked as a
 * pass checks it, but nothing is recorded: not the contact, not the trust anchor, not where the
 * node's folder is; the declaration is read without the cache; no report is made.
 */
import { loadDeclarationWith } from '../../core/declaration/declaration.js';
import type { Logger } from '../log.js';
import { openHost } from '../host.js';
import { previewDeclaration, type Preview } from '../preview.js';
import { assign, contact, settingsProblems } from '../reconcile.js';
import type { HostContext } from '../resources/handler.js';
import { trustStage } from '../trust/gate.js';
import { storeBehindNote } from '../report.js';
import { placed } from '../../core/errors.js';

/** What --noop found: the commit a pass would apply, notes on why that one, and its plan (null when there is none to make). */
export interface NoopResult {
  commit: string | null;
  notes: string[];
  preview: Preview | null;
}

export async function noopPass(hostCtx: HostContext, log: Logger): Promise<NoopResult> {
  const host = await openHost(hostCtx, log);
  const notes: string[] = [];
  const behind = await storeBehindNote(host.repo, host.store, host.config);
  if (behind) notes.push(behind);
  const { commit: tip, disconnected } = await contact(host, false);
  if (disconnected) notes.push(`fleet unreachable (${disconnected}): planned against the last fetched commit`);
  const gate = await trustStage(host, tip, false);
  if (gate.refusal) notes.push(`${gate.refusal.message}: a pass would go on enforcing the last accepted commit`);
  if (gate.commit === null) return { commit: null, notes, preview: null };
  const unread = await settingsProblems(host, gate.commit);
  if (unread.length > 0) return { commit: gate.commit, notes, preview: { lines: [], inSync: 0, problems: unread.map((p) => ({ message: placed(p) })) } };
  const assignment = await assign(host, host.repo.tree(gate.commit), false);
  notes.push(...assignment.errors.map((e) => e.message));
  const loaded = await loadDeclarationWith(assignment.tree, host.config.node, assignment.opts, host.ctx.load.parser);
  if (!loaded.ok) {
    const problems = loaded.problems.map((p) => ({ message: placed(p) }));
    return { commit: gate.commit, notes, preview: { lines: [], inSync: 0, problems } };
  }
  return { commit: gate.commit, notes, preview: await previewDeclaration(assignment.tree, host.config.node, assignment.opts, loaded.declaration, host.store, host.ctx) };
}
