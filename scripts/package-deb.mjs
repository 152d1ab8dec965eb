#!/usr/bin/env node
// `npm run package:deb`: the Debian package of mesh-host, mesh-host_<version>_all.deb, built
// with the real dpkg-deb from the bundled host and the files in packaging/.
//
//   node scripts/package-deb.mjs [--out DIR] [--bundle FILE]
//
// The version is MESH_BUILD_VERSION or package.json's (the bundle is stamped with the same one).
// --out (or MESH_DEB_OUT) is the folder for the .deb, dist/ by default. --bundle packages an
// already built mesh-host.cjs instead of building one (tests package deliberately broken ones).
// Beside the host, /usr/lib/mesh-host/mesh-host.mjs is a loader of it: a host from before the
// host was mesh-host.cjs smoke-runs that path when it upgrades to this package.
// Its units go under /usr/lib/systemd/system, which systemd reads on every Debian release (Debian
// 13's merged /usr asks packages to leave the aliased /lib). Its only maintainer scripts, postinst and postrm, run `systemctl daemon-reload` where systemd
// runs the machine, so that an upgrade's (or a rollback's) unit files are the ones systemd uses;
// under dpkg --root (chrooted, no /run/systemd/system there) they do nothing.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { out: { type: 'string' }, bundle: { type: 'string' } } });
const version = process.env.MESH_BUILD_VERSION ?? JSON.parse(readFileSync(join(top, 'package.json'), 'utf8')).version;
if (!/^[0-9][A-Za-z0-9.+~-]*$/.test(version)) throw new Error(`version ${version} is not a Debian version: it must start with a digit (set MESH_BUILD_VERSION)`);
const out = resolve(args.out ?? process.env.MESH_DEB_OUT ?? join(top, 'dist'));

// The same two lines as agent/upgrade/state.ts writes into last-good (LAST_GOOD_LOADER): test/upgrade.test.ts holds the two equal.
const LOADER = "import { createRequire } from 'node:module';\ncreateRequire(import.meta.url)('./mesh-host.cjs');\n";

const work = mkdtempSync(join(tmpdir(), 'mesh-deb-'));
try {
  let bundle = args.bundle && resolve(args.bundle);
  if (!bundle) {
    execFileSync(process.execPath, [join(top, 'scripts/build.mjs')], { env: { ...process.env, MESH_BUILD_VERSION: version, MESH_BUILD_OUT: join(work, 'build') }, stdio: 'inherit' });
    bundle = join(work, 'build/mesh-host.cjs');
  }
  const tree = join(work, 'tree');
  const put = (from, to, mode) => {
    mkdirSync(dirname(join(tree, to)), { recursive: true });
    copyFileSync(from, join(tree, to));
    chmodSync(join(tree, to), mode);
  };
  put(bundle, 'usr/lib/mesh-host/mesh-host.cjs', 0o755);
  writeFileSync(join(tree, 'usr/lib/mesh-host/mesh-host.mjs'), LOADER, { mode: 0o755 });
  put(join(top, 'packaging/mesh-host'), 'usr/bin/mesh-host', 0o755);
  for (const unit of ['mesh-host.service', 'mesh-host-rollback.service']) put(join(top, 'packaging', unit), `usr/lib/systemd/system/${unit}`, 0o644);
  // State (store, git objects, the last good version) and config: the package owns the folders.
  mkdirSync(join(tree, 'var/lib/mesh-host'), { recursive: true });
  chmodSync(join(tree, 'var/lib/mesh-host'), 0o700);
  mkdirSync(join(tree, 'etc/mesh-host'), { recursive: true });
  const size = Math.ceil(statSync(bundle).size / 1024) + 8;
  const control = readFileSync(join(top, 'packaging/control.in'), 'utf8').replace('@VERSION@', version).replace('@INSTALLED_SIZE@', String(size));
  mkdirSync(join(tree, 'DEBIAN'));
  writeFileSync(join(tree, 'DEBIAN/control'), control);
  for (const script of ['postinst', 'postrm']) put(join(top, 'packaging', script), `DEBIAN/${script}`, 0o755);
  mkdirSync(out, { recursive: true });
  const deb = join(out, `mesh-host_${version.replace(/^\d+:/, '')}_all.deb`);
  execFileSync('dpkg-deb', ['--root-owner-group', '--build', tree, deb], { stdio: ['ignore', 'ignore', 'inherit'] });
  console.log(deb);
} finally {
  rmSync(work, { recursive: true, force: true });
}
