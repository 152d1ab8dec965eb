/**
 * `command`: an action, not a state. It runs `run` (an argv; one /bin/sh -c line with
 * `shell: true`) when a resource it watches changed (`onChange`: the engine passes the trigger,
 * which survives a pass that stopped or a run that failed), when `creates` names a path that is
 * missing, when `unless` exits non-zero, or when `onlyif` exits 0; with none of them it runs on
 * every pass, as Puppet's exec without guards does. It runs in the machine's root folder, or in
 * `cwd` under it, with MESH_ROOT set to the root (it is not confined) and `environment` added, as
 * root or as `user` (its uid and primary group from the root's etc/passwd and the groups that list
 * it in etc/group, with HOME, USER and LOGNAME, as Puppet's exec and a login give them), its
 * guards too. It succeeds when it exits 0 (or a status `returns` lists) within `timeout` (default
 * 5m) and, with `creates`, the path then exists; with `tries`, a run that exits otherwise is run
 * again, `trySleep` apart. It owns nothing: never recorded, and un-declaring runs nothing.
 */
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolve } from 'node:path';
import type { CommandResource } from '../../schema/declaration.js';
import { resourceId } from '../../schema/resource-id.js';
import type { ResourceResult } from '../../schema/report.js';
import { parseDuration } from '../../core/duration.js';
import { crashNow } from '../fault.js';
import { underRoot } from '../paths.js';
import { readGroup, readPasswd } from './accounts.js';
import type { ExecResult, Handler, ResourceContext } from './handler.js';
import { masked, tail } from './program-output.js';

const DEFAULT_TIMEOUT = '5m';

/** Why `r` runs this pass (null: it does not), checking its guards in order and running `unless` only when nothing else calls for it. */
async function reasonToRun(r: CommandResource, ctx: ResourceContext, trigger: string | undefined): Promise<string | null> {
  if (trigger) return trigger;
  if (r.creates !== undefined && !existsSync(underRoot(ctx.root, r.creates))) return `${r.creates} is missing`;
  if (r.unless !== undefined) {
    const check = await execute(r, r.unless, ctx);
    if (check.timedOut) throw new CommandFailed(`unless ${shown(r.unless)} ran past the timeout of ${r.timeout ?? DEFAULT_TIMEOUT} and was killed`, check);
    if (check.code !== 0) return `unless ${shown(r.unless)} exited ${check.code}`;
  }
  if (r.onlyif !== undefined) {
    const check = await execute(r, r.onlyif, ctx);
    if (check.timedOut) throw new CommandFailed(`onlyif ${shown(r.onlyif)} ran past the timeout of ${r.timeout ?? DEFAULT_TIMEOUT} and was killed`, check);
    if (check.code === 0) return `onlyif ${shown(r.onlyif)} exited 0`;
  }
  if (r.onChange === undefined && r.creates === undefined && r.unless === undefined && r.onlyif === undefined) return 'it has no onChange, creates, unless or onlyif, so it runs on every pass';
  return null;
}

/** Run `r` when something calls for it; the line says why, with the exit status and the tail of the output. */
async function runCommand(r: CommandResource, ctx: ResourceContext, trigger: string | undefined): Promise<ResourceResult> {
  const id = resourceId(r);
  try {
    const why = await reasonToRun(r, ctx, trigger);
    if (why === null) return { id, result: 'unchanged' };
    if (ctx.faults.due('before-run')) crashNow();
    const success = r.returns ?? [0];
    const tries = r.tries ?? 1;
    let ran = await execute(r, r.run, ctx);
    let tried = 1;
    for (; tried < tries && !ran.timedOut && !success.includes(ran.code); tried++) {
      await sleep(parseDuration(r.trySleep ?? '0s'));
      ran = await execute(r, r.run, ctx);
    }
    const seen = { exit: ran.timedOut ? undefined : ran.code, output: tail(masked(ran.output ?? ran.stdout + ran.stderr, ctx.masks)) };
    const fields = Object.fromEntries(Object.entries(seen).filter(([, v]) => v !== undefined && v !== ''));
    const changes = [`ran: ${why}${tried > 1 ? ` (try ${tried} of ${tries})` : ''}`];
    if (ran.timedOut) return { id, result: 'failed', changes, error: `ran past its timeout of ${r.timeout ?? DEFAULT_TIMEOUT} and was killed`, ...fields };
    if (!success.includes(ran.code)) return { id, result: 'failed', changes, error: `exited with status ${ran.code}${success.length > 1 || success[0] !== 0 ? ` (success is ${success.join(' or ')})` : ''}${tried > 1 ? `, ${tried} tries` : ''}`, ...fields };
    if (r.creates !== undefined && !existsSync(underRoot(ctx.root, r.creates))) return { id, result: 'failed', changes, error: `exited ${ran.code}, but ${r.creates} (creates) does not exist afterwards`, ...fields };
    return { id, result: 'updated', changes, ...fields };
  } catch (e) {
    if (!(e instanceof CommandFailed)) throw e;
    return { id, result: 'failed', error: e.message, ...(e.ran.output ? { output: tail(masked(e.ran.output, ctx.masks)) } : {}) };
  }
}

class CommandFailed extends Error {
  constructor(
    message: string,
    readonly ran: ExecResult,
  ) {
    super(message);
  }
}

/** Run one command line of `r` in the root (or `cwd` under it) as root or `user`, with MESH_ROOT and `environment`, killed with its children after the timeout. */
function execute(r: CommandResource, line: string[] | string, ctx: ResourceContext): Promise<ExecResult> {
  const root = resolve(ctx.root);
  const [cmd, ...args] = typeof line === 'string' ? ['/bin/sh', '-c', line] : line;
  const cwd = r.cwd === undefined ? root : underRoot(root, r.cwd);
  if (!existsSync(cwd)) throw new CommandFailed(`cwd ${r.cwd} does not exist: declare it as a directory, or name one that is there`, { code: 1, stdout: '', stderr: '' });
  const account = r.user === undefined ? null : accountOf(r.user, ctx);
  return ctx.exec(cmd!, args, { env: { ...r.environment, ...account?.env, MESH_ROOT: root }, cwd, ...account?.ids, timeoutMs: parseDuration(r.timeout ?? DEFAULT_TIMEOUT), group: true });
}

/** The ids and variables a command run as `user` gets, from the root's etc/passwd (pre-flight checked the user is there, or is made first). */
function accountOf(user: string, ctx: ResourceContext): { ids: { uid: number; gid: number; groups: number[] }; env: Record<string, string> } {
  const entry = user === 'root' ? { uid: 0, gid: 0, home: '/root' } : readPasswd(ctx.root).find((u) => u.name === user);
  if (!entry) throw new CommandFailed(`user ${user} is not in this machine's /etc/passwd: declare it as a user resource, or fix the name`, { code: 1, stdout: '', stderr: '' });
  // As initgroups(3): the primary group, and every group whose member list names the user.
  const groups = [...new Set([entry.gid, ...readGroup(ctx.root).filter((g) => g.members.includes(user)).map((g) => g.gid)])];
  return { ids: { uid: entry.uid, gid: entry.gid, groups }, env: { HOME: entry.home || '/', USER: user, LOGNAME: user } };
}

function maskLine(line: ResourceResult, secrets: string[] | undefined): ResourceResult {
  if (!secrets || secrets.length === 0) return line;
  return { ...line, ...(line.changes ? { changes: line.changes.map((c) => masked(c, secrets)) } : {}), ...(line.error ? { error: masked(line.error, secrets) } : {}), ...(line.output ? { output: masked(line.output, secrets) } : {}) };
}

const shown = (line: string[] | string) => (typeof line === 'string' ? JSON.stringify(line) : `[${line.join(', ')}]`);

// What onChange names is declared before the command (render.ts checks it), so the order holds as
// declared, and a watched user or group may well be one this pass removes: not a need. The user it
// runs as and the folder it runs in are: made first where declared, and a user neither declared nor
// on the machine fails the pass in pre-flight, as a file's owner does.
export const commandHandler: Handler<CommandResource> = {
  needs: (r) => [...(r.user ? [{ id: `user:${r.user}`, field: 'user' }] : []), ...(r.cwd ? [{ id: `directory:${r.cwd}`, field: 'cwd' }] : [])],
  triggeredBy: (r) => r.onChange ?? [],
  // What it says (why it ran, its errors, its output) is masked: `run` and `unless` may hold a secret.
  act: async (r, ctx, trigger) => maskLine(await runCommand(r, ctx, trigger), ctx.masks),
  wouldAct: async (r, ctx, trigger) => {
    const why = await reasonToRun(r, ctx, trigger);
    return why === null ? null : masked(why, ctx.masks);
  },

  // It has no state to read, compare or put back: the engine calls `act` in its place.
  read: async () => ({}),
  diff: () => [],
  apply: async () => undefined,
  prior: async () => ({ existed: false }),
  remove: async () => undefined,
};
