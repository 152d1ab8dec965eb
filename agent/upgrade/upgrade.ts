/**
 * The host upgrading itself through its own declaration. It comes in at three points; the first
 * two are the change hooks of the `package` handler for the host's own package (package.ts):
 *
 *   before the `package` step of the host's own package: refuse a version that was rejected on
 *     this machine (failed its self-test, or was rolled back), so that it is not installed again;
 *   after that step installed a version: run the NEW binary once (`self-test`) before anything
 *     else. If it does not exit 0 naming the version installed, the line fails with its output,
 *     the previous version is put back (the supervisor must never start a binary that cannot run)
 *     and this process carries on. If it passes, the upgrade is pending;
 *   after each pass of the loop: a pending upgrade makes this process exit cleanly once its report
 *     is made, and the supervisor (systemd, Restart=always) starts the new binary. The host never
 *     asks the service manager to restart it: stopping a unit from inside it is not safe. It only
 *     resets the unit's start counter first, so that upgrades do not count toward the start limit.
 *
 * Rollback, and why this design: a new version is only trusted after it completed a pass whose
 * report reached the fleet; then it marks itself the last good version and keeps its own bundle
 * and .deb (upgrade/state.ts). A version that passed the smoke run but cannot stay up is caught
 * by the service manager, not by its own code, because broken code cannot be relied on to notice:
 * a crash loop hits the unit's start limit, and a hang (no pass completed within the probation,
 * MESH_HOST_PROBATION, default 15m) exits PROBATION_EXIT, which the unit does not restart. The
 * unit then fails, and OnFailure= runs `mesh-host rollback` from the LAST GOOD bundle (commands/
 * rollback.ts), which reinstalls that version without needing the broken one or the repository,
 * and rejects the bad version so that the next pass does not install it again; that pass's
 * report says so on the package's line. A pass that completes without reaching the fleet ends
 * that probation period, and the next pass gets a whole one from its start: a fleet outage during
 * an upgrade is not a reason to roll back, however long the loop's back-off waits between passes
 * (up to 10 intervals with jitter: longer than the probation with an interval of a few minutes).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { MeshError, messageOf } from '../../core/errors.js';
import type { Logger } from '../log.js';
import { hostPaths, underRoot } from '../paths.js';
import { queryInstalled, removePackage, type Installed } from '../resources/apt.js';
import type { HostContext, HostUpgrade, ResourceContext } from '../resources/handler.js';
import { BUNDLE, hostPackageName, keepLastGood, readUpgradeState, reinstallHost, updateUpgradeState } from './state.js';
import { HOST_VERSION } from '../../core/version.js';
import type { PackageResource } from '../../schema/declaration.js';
import type { ResourceResult } from '../../schema/report.js';
import type { Observed } from '../../core/plan.js';
import { EXIT } from '../../core/exit.js';

/** The host's unit, as its package installs it. */
const HOST_UNIT = 'mesh-host.service';

/** Exit status of a new version that completed no pass within its probation; the unit's RestartPreventExitStatus (core/exit.ts's table). */
export const PROBATION_EXIT = EXIT.probation;

/** The package handler's hooks for the host's own package (it calls them only for that package, installed or changed). */
export const hostUpgrade: HostUpgrade = {
  beforeChange: async (r, ctx) => refuseRejectedHost(r, ctx),
  afterChange: smokeTestHost,
};

/** Refuse the host's own package at a version rejected on this machine (throws; the engine fails the line). */
function refuseRejectedHost(r: PackageResource, ctx: ResourceContext): void {
  if (!r.version) return;
  const { rejected, lastGood } = readUpgradeState(hostPaths(ctx.root));
  if (rejected?.version !== r.version) return;
  throw new MeshError('E_HOST_REJECTED', `${r.name} ${r.version} is refused on this machine since ${rejected.at}: ${rejected.reason}\ndeclare another version${lastGood ? ` (${lastGood.version} is the last good one)` : ''}; declaring ${r.version} again after another one tries it again`);
}

/** After the host's own package was installed: smoke-test the new binary; on failure put the previous version back and throw. */
async function smokeTestHost(r: PackageResource, line: ResourceResult, before: Observed, ctx: ResourceContext): Promise<ResourceResult> {
  if (line.result !== 'created' && line.result !== 'updated') return line;
  const paths = hostPaths(ctx.root);
  const installed = (await queryInstalled(ctx, r.name))?.version ?? '?';
  const started = ctx.debug && performance.now();
  const smoke = await selfTest(ctx, installed);
  ctx.debug?.({ package: r.name, installed, running: HOST_VERSION, passed: smoke.ok, ms: Math.round(performance.now() - started!) }, 'host package self-tested');
  const at = ctx.now().toISOString();
  if (smoke.ok && installed === HOST_VERSION) return { ...line, changes: [...(line.changes ?? []), `self-test of ${r.name} ${installed} passed`] };
  if (smoke.ok) {
    updateUpgradeState(paths, (s) => {
      s.pending = { from: HOST_VERSION, to: installed, at };
      delete s.rejected;
    });
    return { ...line, changes: [...(line.changes ?? []), `self-test of ${r.name} ${installed} passed: this host (${HOST_VERSION}) exits after this pass's report and the supervisor starts ${installed}`] };
  }
  updateUpgradeState(paths, (s) => {
    s.rejected = { version: installed, reason: `its self-test failed:\n${smoke.output}`, at };
  });
  const previous = (before as Installed | null)?.version;
  let restored: string;
  try {
    if (previous) await reinstallHost(ctx, paths, r.name, previous);
    else await removePackage(ctx, r.name);
    restored = previous ? `${previous} was put back` : `${r.name} was removed again`;
  } catch (e) {
    restored = `putting the previous version back FAILED, so the supervisor would start the broken binary: a person must act (${messageOf(e)})`;
  }
  throw new MeshError('E_SELF_TEST', `the new host binary ${r.name} ${installed} failed its self-test, so it does not take over: this host (${HOST_VERSION}) keeps running and ${restored}\n${smoke.output}`, { data: { installed, previous } });
}

/** Run `node BUNDLE self-test --json` of the binary now installed under the root: it must exit 0 and say `version`. */
async function selfTest(ctx: ResourceContext, version: string): Promise<{ ok: boolean; output: string }> {
  const r = await ctx.exec(process.execPath, [underRoot(ctx.root, BUNDLE), 'self-test', '--root', ctx.root, '--json'], { timeoutMs: 120_000 });
  const head = `  $ node ${BUNDLE} self-test --json  (exit ${r.code})`;
  try {
    const said = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as { version: string; checks: Array<{ check: string; ok: boolean; detail: string }> };
    const failed = said.checks.filter((c) => !c.ok).map((c) => `  FAIL ${c.check}: ${c.detail}`);
    const wrong = said.version === version ? [] : [`  it says it is version ${said.version}, but the package installed ${version}`];
    return { ok: r.code === 0 && failed.length === 0 && wrong.length === 0, output: [head, ...failed, ...wrong].join('\n') };
  } catch {
    // What node said, without its stack frames: the message and the place are what a person needs.
    // A syntax error quotes its source line, which in a bundle can be hundreds of KB: keep its start.
    const clip = (l: string) => (l.length > 240 ? `${l.slice(0, 240)}… (${l.length} characters)` : l);
    const tail = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => l.trim() !== '' && !/^\s+at |^Node\.js v/.test(l)).slice(-6);
    // Node quotes that line before the error itself and stops at 64 KB of stderr on a pipe, so the
    // error can be missing: then load the binary once more just to learn what it is.
    if (!tail.some((l) => /^\s*[A-Z]\w*Error\b/.test(l))) tail.push(...(await loadError(ctx)));
    return { ok: false, output: [head, ...tail.map((l) => `  ${clip(l)}`)].join('\n') };
  }
}

/** The error that loading the installed binary throws (a syntax error, a missing module), or nothing. */
async function loadError(ctx: ResourceContext): Promise<string[]> {
  const loader = "const f = process.argv.splice(1, 1)[0]; import(require('node:url').pathToFileURL(f).href).catch((e) => { console.error(String(e)); process.exit(1); });";
  const r = await ctx.exec(process.execPath, ['-e', loader, underRoot(ctx.root, BUNDLE), '--version'], { timeoutMs: 60_000 });
  return r.code === 0 ? [] : r.stderr.split('\n').filter((l) => /^\s*[A-Z]\w*Error\b/.test(l)).slice(0, 2);
}

export interface UpgradeWatch {
  /** Before each pass: a version on probation must complete it within the probation (the wait before it does not count). */
  starting(): void;
  /** After each pass: marks this version good once a report reached the fleet (`sent`); true when the host must exit for the supervisor to start its new version. */
  passed(pass: { sent: boolean }): Promise<boolean>;
  /** After a pass that failed for a cause outside this version (`why`): as after a completed pass, the next one gets a whole probation. */
  excuse(why: string): void;
}

/**
 * Watch the reconcile loop for upgrades. A version just installed that has not proven itself is
 * on probation (`probationMs`, MESH_HOST_PROBATION read by main.ts): from its start, and again
 * from the start of each pass after one that completed, it has that long to complete a pass, or
 * it exits PROBATION_EXIT. A pass that throws does not end the period (its time and the wait
 * after it count), unless the machine refused a write (a full or read-only filesystem, `excuse`):
 * like a fleet outage, that says nothing of the new version, which must not be rolled back and
 * refused for it.
 */
export function watchUpgrade(ctx: HostContext, log: Logger, loop: boolean, probationMs: number): UpgradeWatch {
  const paths = hostPaths(ctx.root);
  let onProbation = loop && safely(() => readUpgradeState(paths).pending?.to === HOST_VERSION, false, log);
  let probation: NodeJS.Timeout | undefined;
  const arm = () => {
    // Unref'd: it must never keep a stopping host alive; a host waiting on the network is kept alive by its socket.
    probation = setTimeout(() => {
      log.fatal({ version: HOST_VERSION, probationMs }, 'this new host version completed no pass within its probation: exiting for rollback');
      process.exit(PROBATION_EXIT);
    }, probationMs).unref();
  };
  const disarm = () => {
    clearTimeout(probation);
    probation = undefined;
  };
  if (onProbation) arm();
  return {
    starting() {
      if (onProbation && !probation) arm();
    },
    async passed(pass) {
      disarm(); // this pass completed; the next one gets a whole probation from its start
      try {
        const name = hostPackageName(paths);
        const { lastGood, pending: proving } = readUpgradeState(paths);
        const unproven = lastGood?.version !== HOST_VERSION || proving?.to === HOST_VERSION;
        if (pass.sent && unproven && (await installedIsMe(ctx, name))) {
          const problem = await keepLastGood(ctx, paths, name, HOST_VERSION);
          onProbation = false;
          log.info({ version: HOST_VERSION, ...(problem ? { problem } : {}) }, `${name} ${HOST_VERSION} completed a pass and a report: it is the last good version`);
        }
        const pending = readUpgradeState(paths).pending;
        if (pending?.from !== HOST_VERSION || pending.to === HOST_VERSION) return false;
        await forgetStartsBeforeHandover(ctx, log);
        log.info({ from: pending.from, to: pending.to }, `exiting so that the supervisor starts ${name} ${pending.to}`);
        return true;
      } catch (e) {
        log.error({ err: messageOf(e) }, 'cannot keep the upgrade record');
        return false;
      }
    },
    excuse(why) {
      if (!probation) return;
      disarm();
      log.warn({ version: HOST_VERSION, why }, 'this pass failed for a cause outside this new host version: its probation starts again with the next pass');
    },
  };
}

/**
 * Before this proven version exits for an upgrade: reset the unit's start counter (`systemctl
 * reset-failed`), so that the start limit counts only the starts of a version that does not stay
 * up. Without it every upgrade is a start too, and a few good hotfixes in a row hit the limit and
 * have a healthy version rolled back. Only where systemd runs the machine; a failure is logged.
 */
async function forgetStartsBeforeHandover(ctx: HostContext, log: Logger): Promise<void> {
  if (resolve(ctx.root) !== '/' || !existsSync('/run/systemd/system')) return;
  const r = await ctx.exec('systemctl', ['reset-failed', '--', HOST_UNIT], { env: { LC_ALL: 'C' } });
  if (r.code !== 0) log.warn({ err: r.stderr.trim() }, `could not reset ${HOST_UNIT}'s start counter: this upgrade counts toward its start limit`);
}

/** Whether the root's dpkg has the host package installed at this process's own version. */
async function installedIsMe(ctx: HostContext, name: string): Promise<boolean> {
  if (!existsSync(underRoot(ctx.root, `/var/lib/dpkg/info/${name}.list`))) return false;
  const now = await queryInstalled(ctx, name);
  return now?.version === HOST_VERSION && now.status === 'installed';
}

/** MESH_HOST_PROBATION: a number with ms, s (the default unit), m or h; 15 minutes when unset or unreadable. */
export function parseProbation(text: string | undefined): number {
  const m = /^(\d+)(ms|s|m|h)?$/.exec(text?.trim() ?? '');
  return m ? Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] ?? 's']! : 15 * 60_000;
}

function safely<T>(fn: () => T, fallback: T, log: Logger): T {
  try {
    return fn();
  } catch (e) {
    log.error({ err: messageOf(e) }, 'cannot read the upgrade record');
    return fallback;
  }
}
