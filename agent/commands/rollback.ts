/**
 * `mesh-host rollback`: put the last good host version back after a newer one failed to stay
 * up. mesh-host-rollback.service runs it (OnFailure= of mesh-host.service) from the bundle the
 * last good version kept of itself, never from the version it replaces, which may not run at
 * all. It rejects the failed version, so that the next pass does not install it again and its
 * report says what happened, and reinstalls the last good one from its kept .deb (else from the
 * package repository). The unit then starts the host again.
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
  from: string | null;
  to: string;
  message: string;
}

/** Reinstall the last good version in place of the installed one; `env` carries systemd's MONITOR_* variables. */
export async function rollback(ctx: HostContext, env: NodeJS.ProcessEnv): Promise<Rollback> {
  const paths = hostPaths(ctx.root);
  acquireLock(paths);
  const name = hostPackageName(paths);
  const good = readUpgradeState(paths).lastGood?.version;
  const from = (await queryInstalled(ctx, name))?.version ?? null;
  if (!good) {
    throw new MeshError('E_NO_LAST_GOOD', `no version of ${name} has completed a pass on this machine yet, so there is nothing to roll back to: find out why ${from ?? name} fails (journalctl -u mesh-host) and install a working version by hand`);
  }
  if (from === good) {
    return { rolledBack: false, from, to: good, message: `${name} ${good} is installed and is the last good version: nothing to roll back to. Find out why it fails: journalctl -u mesh-host` };
  }
  const reason = `rolled back from ${from ?? 'nothing'} to ${good}: after it passed its self-test, it did not complete a pass and a report (${failure(env)})`;
  if (from) updateUpgradeState(paths, (s) => void (s.rejected = { version: from, reason, at: ctx.now().toISOString() }));
  await reinstallHost(ctx, paths, name, good);
  updateUpgradeState(paths, (s) => {
    delete s.pending;
  });
  return { rolledBack: true, from, to: good, message: reason };
}

/** How the host's unit failed, from the variables systemd gives an OnFailure= unit. */
function failure(env: NodeJS.ProcessEnv): string {
  const unit = env.MONITOR_UNIT ?? 'mesh-host.service';
  if (!env.MONITOR_SERVICE_RESULT) return 'rollback run by hand';
  if (env.MONITOR_EXIT_STATUS === String(PROBATION_EXIT)) return `${unit}: no pass completed within its probation`;
  const exit = env.MONITOR_EXIT_CODE ? `; last exit: ${env.MONITOR_EXIT_CODE} ${env.MONITOR_EXIT_STATUS ?? ''}`.trimEnd() : '';
  return `${unit} failed: ${env.MONITOR_SERVICE_RESULT}${exit}`;
}
