/**
 * `package`: one Debian package, at an exact `version`, at any version (`ensure: present`, the
 * default) or absent (with `purge`, its configuration files too), through the machine's real
 * apt-get and dpkg (see apt.ts for how they are kept under the root). Reading asks only the root's
 * dpkg database, so a pass with nothing to change runs no apt at all; the package lists are
 * refreshed only when they are missing, older than the sources, or do not know the version asked
 * for. Un-declaring: a package that was
 * installed before the host took it over stays installed and gets its earlier version back
 * (when that version can still be had); a package the host installed is removed.
 *
 * The host's own package (ctx.hostPackage) is how the host upgrades itself: its change hooks
 * hand it to upgrade/upgrade.ts, loaded only then, which refuses a version rejected on this machine and
 * smoke-tests a newly installed one.
 */
import type { PackageResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { installPackage, queryInstalled, removePackage, type Installed } from './apt.js';
import type { Handler, ResourceContext } from './handler.js';

/** Whether `r` installs or changes the host's own package. */
const isHost = (r: PackageResource, ctx: ResourceContext) => r.ensure !== 'absent' && r.name === ctx.hostPackage;

export const packageHandler: Handler<PackageResource> = {
  // apt's sources, keys and preferences, where the fleet declares them, go first (as Puppet's apt module orders every source before every package).
  needsUnder: () => ['/etc/apt/'],

  async beforeChange(r, ctx) {
    if (isHost(r, ctx)) await (await ctx.load.hostUpgrade()).beforeChange(r, ctx);
  },

  async afterChange(r, line, before, ctx) {
    return isHost(r, ctx) ? (await ctx.load.hostUpgrade()).afterChange(r, line, before, ctx) : line;
  },

  async read(r, ctx) {
    return queryInstalled(ctx, r.name, r.purge === true);
  },

  diff(r, observed) {
    const now = observed as Installed | null;
    if (r.ensure === 'absent') {
      if (!now) return [];
      return now.status === 'config-files' ? [`removed, its configuration files (of ${now.version}) remain, should be purged`] : [`installed at ${now.version}, should be ${r.purge ? 'purged' : 'absent'}`];
    }
    if (!now) return [`not installed, should be ${r.version ?? 'installed'}`];
    const changes: string[] = [];
    if (r.version !== undefined && now.version !== r.version) changes.push(`version ${now.version} → ${r.version}`);
    if (now.status !== 'installed') changes.push(`dpkg state ${now.status}, should be installed`);
    return changes;
  },

  async apply(r, observed, ctx) {
    const now = observed as Installed | null;
    if (r.ensure === 'absent') return removePackage(ctx, r.name, r.purge === true);
    // A half-installed package at the right version is repaired by installing it again.
    const reinstall = now !== null && now.status !== 'installed' && (r.version === undefined || r.version === now.version);
    await installPackage(ctx, r.name, r.version, reinstall);
  },

  async prior(_r, observed) {
    const now = observed as Installed | null;
    // Configuration files alone are not a package to put back.
    return now && now.status !== 'config-files' ? { existed: true, version: now.version } : { existed: false };
  },

  async remove(record, ctx) {
    const name = String(record.resource.name);
    const now = await queryInstalled(ctx, name);
    if (!record.prior?.existed) {
      if (now) await removePackage(ctx, name);
      return undefined;
    }
    const before = String(record.prior.version);
    if (now?.version === before && now.status === 'installed') return `left ${name} ${before} installed: it was installed before mesh took it over`;
    try {
      await installPackage(ctx, name, before, false);
    } catch (e) {
      if (!(e instanceof MeshError) || e.code !== 'E_PACKAGE_NOT_FOUND') throw e;
      return `left ${name} at ${now ? now.version : 'not installed'}: version ${before}, installed before mesh took it over, is no longer in the package repository`;
    }
    return `restored ${name} to ${before}, the version installed before mesh took it over`;
  },
};
