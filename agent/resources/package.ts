/**
 * `package`: one Debian package, at an exact `version`, at any version (`ensure: present`, the
 * default) or absent, through the machine's real apt-get and dpkg (see apt.ts for how they are
 * kept under the root). Reading asks only the root's dpkg database, so a pass with nothing to
 * change runs no apt at all; the package lists are refreshed only when they are missing, older
 * than the sources, or do not know the version asked for. Un-declaring: a package that was
 * installed before the host took it over stays installed and gets its earlier version back
 * (when that version can still be had); a package the host installed is removed.
 */
import type { PackageResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { aptFailure, aptGet, NOT_FOUND, queryInstalled, refreshLists, type Installed } from './apt.js';
import type { Handler, ResourceContext } from './handler.js';

export const packageHandler: Handler<PackageResource> = {
  async read(r, ctx) {
    return queryInstalled(ctx, r.name);
  },

  diff(r, observed) {
    const now = observed as Installed | null;
    if (r.ensure === 'absent') return now ? [`installed at ${now.version}, should be absent`] : [];
    if (!now) return [`not installed, should be ${r.version ?? 'installed'}`];
    const changes: string[] = [];
    if (r.version !== undefined && now.version !== r.version) changes.push(`version ${now.version} → ${r.version}`);
    if (now.status !== 'installed') changes.push(`dpkg state ${now.status}, should be installed`);
    return changes;
  },

  async apply(r, observed, ctx) {
    const now = observed as Installed | null;
    if (r.ensure === 'absent') return removePackage(ctx, r.name);
    // A half-installed package at the right version is repaired by installing it again.
    const reinstall = now !== null && now.status !== 'installed' && (r.version === undefined || r.version === now.version);
    await installPackage(ctx, r.name, r.version, reinstall);
  },

  async prior(_r, observed) {
    const now = observed as Installed | null;
    return now ? { existed: true, version: now.version } : { existed: false };
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

/** `apt-get install NAME[=VERSION]`, refreshing the lists first when stale and once more when they do not know it. */
export async function installPackage(ctx: ResourceContext, name: string, version: string | undefined, reinstall: boolean): Promise<void> {
  const spec = version === undefined ? name : `${name}=${version}`;
  const args = ['install', '-y', '--allow-downgrades', ...(reinstall ? ['--reinstall'] : []), spec];
  const refreshed = await refreshLists(ctx);
  let r = await aptGet(ctx, args);
  if (r.code !== 0 && NOT_FOUND.test(r.stdout + r.stderr) && !refreshed) {
    await refreshLists(ctx, true);
    r = await aptGet(ctx, args);
  }
  if (r.code === 0) return;
  if (NOT_FOUND.test(r.stdout + r.stderr)) {
    const what = version === undefined ? name : `version ${version} of ${name}`;
    throw aptFailure(`apt-get install ${spec}`, r, `the package sources of this machine do not offer ${what}: publish it to the fleet's package repository, or declare a version it has`, 'E_PACKAGE_NOT_FOUND');
  }
  throw aptFailure(`apt-get install ${spec}`, r, 'fix the cause above (the package or the machine); the next pass tries again');
}

/** `apt-get remove NAME`, refused when apt would also remove packages that depend on it. */
export async function removePackage(ctx: ResourceContext, name: string): Promise<void> {
  const plan = await aptGet(ctx, ['-s', 'remove', name]);
  if (plan.code !== 0) throw aptFailure(`apt-get remove ${name}`, plan, 'fix the cause above; the next pass tries again');
  const others = [...plan.stdout.matchAll(/^Remv (\S+)/gm)].map((m) => m[1]!).filter((p) => p.split(':')[0] !== name);
  if (others.length > 0) {
    throw new MeshError('E_PACKAGE_NEEDED', `removing ${name} would also remove what depends on it (${others.join(', ')}): mesh removes only what it was asked to; remove or un-declare those first, or keep ${name} declared`, { data: { name, others } });
  }
  const r = await aptGet(ctx, ['remove', '-y', name]);
  if (r.code !== 0) throw aptFailure(`apt-get remove ${name}`, r, 'fix the cause above; the next pass tries again');
}
