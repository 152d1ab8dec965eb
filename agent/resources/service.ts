/**
 * `service` (systemd): whether a unit is enabled, whether it runs, and restarting it when a
 * file it watches changed in the same pass. Enabling works offline on any root through
 * `systemctl --root`; running and restarting need a systemd that runs the machine, which
 * exists only when the root is "/" and the machine booted with systemd. Without one the host
 * says so (`unverified`) instead of claiming what it cannot check.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ServiceResource } from '../../schema/declaration.js';
import { PATH_TYPES } from '../../schema/resource-id.js';
import { MeshError } from '../../core/errors.js';
import { dropInDir, unitFile } from '../../core/declaration/unit-file.js';
import type { Handler, ResourceContext } from './handler.js';

/** The systemd that runs the machine at a root, or the reason there is none. */
export interface ServiceManager {
  /** Why services cannot be seen running or be started here; undefined when a systemd runs. */
  absent?: string;
  isActive(unit: string): Promise<boolean>;
  /** Start, stop, restart or reload `unit`; a real systemd reads its unit files again first when they changed on disk (reloadIfStale). */
  control(verb: 'start' | 'stop' | 'restart' | 'reload', unit: string): Promise<void>;
  /**
   * `systemctl daemon-reload` when systemd says the unit's files changed on disk since it read them
   * (NeedDaemonReload): until then a start or restart runs the old definition. True when it did.
   */
  reloadIfStale?(unit: string): Promise<boolean>;
}

/** A resource context that may carry a service manager (tests hand in a simulated one). */
export type ServiceContext = ResourceContext & { systemd?: ServiceManager };

export interface ServiceState extends Record<string, unknown> {
  /** What `systemctl is-enabled` says (enabled, disabled, static, masked, …), or not-found. */
  enabled: string;
  /** null when no running systemd can tell. */
  running: boolean | null;
}

/** The real systemd for `ctx.root`: only "/" on a machine booted with systemd has one (sd_booted's test). */
export function systemdFor(ctx: ServiceContext): ServiceManager {
  if (ctx.systemd) return ctx.systemd;
  const booted = resolve(ctx.root) === '/' && existsSync('/run/systemd/system');
  const reloadIfStale = async (unit: string) => {
    if ((await systemctl(ctx, ['show', '--property=NeedDaemonReload', '--value', '--', unit])).trim() !== 'yes') return false;
    await systemctl(ctx, ['daemon-reload']);
    return true;
  };
  return {
    absent: booted ? undefined : 'no running systemd under this root',
    isActive: async (unit) => (await ctx.exec('systemctl', ['is-active', '--quiet', '--', unit])).code === 0,
    control: async (verb, unit) => {
      if (verb !== 'stop') await reloadIfStale(unit);
      await systemctl(ctx, [verb, '--', unit]);
    },
    reloadIfStale,
  };
}

async function systemctl(ctx: ResourceContext, args: string[], offline = false): Promise<string> {
  const root = resolve(ctx.root);
  const r = await ctx.exec('systemctl', offline && root !== '/' ? [`--root=${root}`, ...args] : args, { env: { LC_ALL: 'C' } });
  if (r.code !== 0) throw new MeshError('E_SYSTEMCTL', `systemctl ${args.join(' ')} failed: ${r.stderr.trim().split('\n')[0] || `exit code ${r.code}`}`);
  return r.stdout;
}

const isEnabled = (state: string) => state === 'enabled' || state === 'enabled-runtime';

async function readState(ctx: ServiceContext, unit: string): Promise<ServiceState> {
  const root = resolve(ctx.root);
  const r = await ctx.exec('systemctl', [...(root === '/' ? [] : [`--root=${root}`]), 'is-enabled', '--', unit], { env: { LC_ALL: 'C' } });
  const said = r.stdout.trim().split('\n')[0] ?? '';
  if (!said && !/No such file or directory|not found/i.test(r.stderr)) throw new MeshError('E_SYSTEMCTL', `systemctl is-enabled ${unit} failed: ${r.stderr.trim() || `exit code ${r.code}`}`);
  const systemd = systemdFor(ctx);
  return { enabled: said || 'not-found', running: systemd.absent ? null : await systemd.isActive(unit) };
}

async function converge(ctx: ServiceContext, unit: string, want: { enabled?: boolean; running?: boolean }, now: ServiceState): Promise<void> {
  if (want.enabled !== undefined && want.enabled !== isEnabled(now.enabled)) await systemctl(ctx, [want.enabled ? 'enable' : 'disable', '--', unit], true);
  const systemd = systemdFor(ctx);
  if (want.running !== undefined && !systemd.absent && want.running !== now.running) {
    await systemd.control(want.running ? 'start' : 'stop', unit);
    if (want.running) ctx.pass.started.add(unit);
  }
}

/** Why `r` cannot be fully verified here (declares `running` without a running systemd); undefined when it can. */
export function serviceUnverifiable(r: ServiceResource, ctx: ServiceContext): string | undefined {
  const absent = systemdFor(ctx).absent;
  return r.running !== undefined && absent ? `${absent}: running=${r.running} not verified` : undefined;
}

/**
 * Restart `r` because files in its restartOn changed in this pass, or reload it because files in
 * its reloadOn did (a restart makes the reload needless; a service that is not running is not
 * reloaded: it reads the new files when it starts); without a running systemd it only says what
 * was requested. When only its unit file or a drop-in of it changed (declared, in neither list),
 * systemd reads them again and the service is neither restarted nor reloaded: the lists say when.
 * A service this pass started is neither: it started with the new files (which it needs, so they
 * were written first).
 */
export async function restartService(r: ServiceResource, ctx: ServiceContext, changed: string[]): Promise<{ change: string; unverified?: string } | null> {
  // Started by this pass, after what it watches was written (a service needs those files): it runs them already. Puppet unschedules such a refresh too.
  if (ctx.pass.started.has(r.name)) return null;
  const systemd = systemdFor(ctx);
  const because = (list: string[] | undefined) => `${changed.filter((p) => list?.includes(p)).join(', ')} changed`;
  const verb = changed.some((p) => r.restartOn?.includes(p)) ? 'restart' : changed.some((p) => r.reloadOn?.includes(p)) ? 'reload' : null;
  if (verb === null) {
    // Without a running systemd there is nothing to reload: the next boot reads the new file.
    return !systemd.absent && (await systemd.reloadIfStale?.(r.name)) ? { change: `unit files read again (daemon-reload): ${changed.join(', ')} changed` } : null;
  }
  const why = because(verb === 'restart' ? r.restartOn : r.reloadOn);
  if (systemd.absent) return { change: `${verb} requested: ${why}`, unverified: `${verb} requested but no running systemd` };
  if (verb === 'reload' && !(await systemd.isActive(r.name))) return null;
  await systemd.control(verb, r.name);
  if (!(await systemd.isActive(r.name))) throw new MeshError(verb === 'restart' ? 'E_RESTART' : 'E_RELOAD', `${r.name} was ${verb}ed (${why}) but is not active afterwards`);
  return { change: `${verb}ed: ${why}` };
}

export const serviceHandler: Handler<ServiceResource> = {
  // Its unit file, when the fleet declares it, and the files it restarts on go first (and a service whose unit file failed is not started).
  needs: (r) => [
    ...['file', 'symlink'].map((type) => ({ id: `${type}:${unitFile(r.name)}`, field: 'name' })),
    ...(r.restartOn ?? []).flatMap((p) => [...PATH_TYPES].map((type) => ({ id: `${type}:${p}`, field: 'restartOn' }))),
    ...(r.reloadOn ?? []).flatMap((p) => [...PATH_TYPES].map((type) => ({ id: `${type}:${p}`, field: 'reloadOn' }))),
  ],
  // Its drop-ins (NAME.service.d/*.conf), where the fleet declares them, likewise.
  needsUnder: (r) => [dropInDir(r.name)],
  unverifiable: serviceUnverifiable,
  watches: (r) => [...new Set([unitFile(r.name), dropInDir(r.name), ...(r.restartOn ?? []), ...(r.reloadOn ?? [])])],
  refresh: restartService,
  wouldRefresh: (r, changed, ctx, now) => {
    if (r.running === true && (now as ServiceState | null)?.running === false) return null; // started by the pass, with the new files
    if (changed.some((p) => r.restartOn?.includes(p))) return 'a pass would restart it';
    if (changed.some((p) => r.reloadOn?.includes(p))) return 'a pass would reload it (when it runs)';
    return systemdFor(ctx).absent ? null : 'a pass would have systemd read its unit files again (daemon-reload; restartOn says when it restarts)';
  },

  async read(r, ctx) {
    return readState(ctx, r.name);
  },

  diff(r, observed) {
    const now = observed as ServiceState;
    const changes: string[] = [];
    if (r.enabled !== undefined && r.enabled !== isEnabled(now.enabled)) changes.push(`${now.enabled} → ${r.enabled ? 'enabled' : 'disabled'}`);
    if (r.running !== undefined && now.running !== null && r.running !== now.running) changes.push(r.running ? 'stopped → running' : 'running → stopped');
    return changes;
  },

  async apply(r, observed, ctx) {
    await converge(ctx, r.name, r, observed as ServiceState);
  },

  async prior(_r, observed) {
    return { existed: (observed as ServiceState).enabled !== 'not-found', state: observed };
  },

  // Put back the enabled (and, where a systemd runs, running) state from before; a unit mesh found absent ends disabled.
  async remove(record, ctx) {
    const unit = String(record.resource.name);
    const before = (record.prior?.state ?? null) as ServiceState | null;
    const now = await readState(ctx, unit);
    if (now.enabled === 'not-found') return undefined;
    const want = record.prior?.existed ? { enabled: before ? isEnabled(before.enabled) : undefined, running: before?.running ?? undefined } : { enabled: false, running: false };
    await converge(ctx, unit, want, now);
    return record.prior?.existed ? `put ${unit} back to ${before ? before.enabled : 'as it was'}` : undefined;
  },
};
