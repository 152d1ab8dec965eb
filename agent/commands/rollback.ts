/**
 * `mesh-host rollback`: put the last good host version back after a newer one failed to stay
 * up. mesh-host-rollback.service runs it (OnFailure= of mesh-host.service) from the bundle the
 * last good version kept of itself, never from the version it replaces, which may not run at
 * all. It rejects the failed version, so that the next pass does not install it again and its
 * report says what happened, and reinstalls the last good one from its kept .deb (else from the
 * package repository). The unit then starts the host again.
 *
 * Only a unit that systemd has given up on is rolled back: one that crashed until its start limit
 * (a version that keeps crashing) or exited 69 (one that never completed a pass in its probation).
 * Since systemd 254 (Debian 13), OnFailure= also runs after each single failed run that Restart=
 * is about to restart. systemd's MONITOR_* variables do not tell the two apart (at the start
 * limit MONITOR_SERVICE_RESULT is still the last run's exit-code), so the unit's own state does:
 * `failed` (or `dead`) is for good, anything else (auto-restart, running again) is a restart under
 * way. That run is answered with `waiting` (exit 4, "not yet"), and the rollback unit then leaves
 * the host's start counter alone, so that a crash loop still reaches the start limit.
 */
import { MeshError } from '../../core/errors.js';
import { acquireLock } from '../lock.js';
import { hostPaths } from '../paths.js';
import { queryInstalled } from '../resources/apt.js';
import type { HostContext } from '../resources/handler.js';
import { PROBATION_EXIT } from '../upgrade/upgrade.js';
import { hostPackageName, readUpgradeState, reinstallHost, updateUpgradeState } from '../upgrade/state.js';

export interface Rollback {
  rolledBack: boolean;
  /** The failure is one systemd restarts from (its start limit not reached): nothing was done. */
  waiting?: boolean;
  from: string | null;
  to: string;
  message: string;
}

/** Reinstall the last good version in place of the installed one; `env` carries systemd's MONITOR_* variables. */
export async function rollback(ctx: HostContext, env: NodeJS.ProcessEnv): Promise<Rollback> {
  const paths = hostPaths(ctx.root);
  const state = await unitState(ctx, env);
  if (state !== null && !['failed', 'dead'].includes(state)) {
    const to = readUpgradeState(paths).lastGood?.version ?? 'none';
    return { rolledBack: false, waiting: true, from: null, to, message: `${failure(env, null)}, and systemd restarts it (${env.MONITOR_UNIT}: ${state}): no rollback before it hits its start limit or ends its probation` };
  }
  acquireLock(paths);
  const name = hostPackageName(paths);
  const good = readUpgradeState(paths).lastGood?.version;
  const from = (await queryInstalled(ctx, name))?.version ?? null;
  if (!good && from === null) {
    throw new MeshError('E_NO_LAST_GOOD', `${name} is not installed as a Debian package on this machine, so there is no version to roll back to: a rollback reinstalls the last good version of the package (install mesh-host from its .deb or your package repository to have one)`);
  }
  if (!good) {
    throw new MeshError('E_NO_LAST_GOOD', `no version of ${name} has completed a pass on this machine yet, so there is nothing to roll back to: find out why ${from ?? name} fails (journalctl -u mesh-host) and install a working version by hand`);
  }
  if (from === good) {
    return { rolledBack: false, from, to: good, message: `${name} ${good} is installed and is the last good version: nothing to roll back to. Find out why it fails: journalctl -u mesh-host` };
  }
  const reason = `rolled back from ${from ?? 'nothing'} to ${good}: after it passed its self-test, it did not complete a pass and a report (${failure(env, state)})`;
  if (from) updateUpgradeState(paths, (s) => void (s.rejected = { version: from, reason, at: ctx.now().toISOString() }));
  await reinstallHost(ctx, paths, name, good);
  updateUpgradeState(paths, (s) => {
    delete s.pending;
  });
  return { rolledBack: true, from, to: good, message: reason };
}

/**
 * The sub-state of the unit whose failure started this run (MONITOR_UNIT), as systemd has it now;
 * null when run by hand (no MONITOR_UNIT), or when systemd cannot be asked: then the rollback goes
 * ahead, as it did before systemd told OnFailure= units of every failed run.
 */
async function unitState(ctx: HostContext, env: NodeJS.ProcessEnv): Promise<string | null> {
  if (!env.MONITOR_UNIT) return null;
  const r = await ctx.exec('systemctl', ['show', '--property=SubState', '--value', '--', env.MONITOR_UNIT], { env: { LC_ALL: 'C' } }).catch(() => null);
  const state = r?.code === 0 ? r.stdout.trim() : '';
  return state === '' ? null : state;
}

/** How the host's unit failed, from the variables systemd gives an OnFailure= unit and, once it has given up, the unit's state. */
function failure(env: NodeJS.ProcessEnv, state: string | null): string {
  const unit = env.MONITOR_UNIT ?? 'mesh-host.service';
  if (!env.MONITOR_SERVICE_RESULT) return 'rollback run by hand';
  if (env.MONITOR_EXIT_STATUS === String(PROBATION_EXIT)) return `${unit}: no pass completed within its probation`;
  const exit = env.MONITOR_EXIT_CODE ? `; last exit: ${env.MONITOR_EXIT_CODE} ${env.MONITOR_EXIT_STATUS ?? ''}`.trimEnd() : '';
  const given = state === 'failed' ? ', and systemd stopped restarting it (start limit)' : '';
  return `${unit} failed: ${env.MONITOR_SERVICE_RESULT}${exit}${given}`;
}
