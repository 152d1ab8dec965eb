/**
 * Real Debian packaging for tests: small .deb files built with `dpkg-deb`, a flat apt
 * repository indexed with `dpkg-scanpackages`, and a simulated machine's own dpkg database.
 * Test packages have no maintainer scripts, so dpkg never has to run anything inside a root.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';

export interface DebSpec {
  name: string;
  version: string;
  /** Machine path → content of each file the package installs. */
  files?: Record<string, string>;
  depends?: string;
  /** Paths among `files` that dpkg keeps as configuration files (kept on remove, removed on purge). */
  conffiles?: string[];
}

/** Build `NAME_VERSION_all.deb` in `dir` with the real `dpkg-deb --build`; returns its path. */
export function buildDeb(dir: string, spec: DebSpec): string {
  const tree = mkdtempSync(join(dir, '.deb-'));
  try {
    mkdirSync(join(tree, 'DEBIAN'));
    const control = [`Package: ${spec.name}`, `Version: ${spec.version}`, 'Architecture: all', 'Maintainer: mesh tests <tests@localhost>', ...(spec.depends ? [`Depends: ${spec.depends}`] : []), `Description: mesh test package ${spec.name}`];
    writeFileSync(join(tree, 'DEBIAN/control'), control.join('\n') + '\n');
    if (spec.conffiles) writeFileSync(join(tree, 'DEBIAN/conffiles'), spec.conffiles.map((path) => `${path}\n`).join(''));
    for (const [path, content] of Object.entries(spec.files ?? {})) {
      mkdirSync(dirname(join(tree, path)), { recursive: true });
      writeFileSync(join(tree, path), content);
    }
    const deb = join(dir, `${spec.name}_${spec.version.replace(/^\d+:/, '')}_all.deb`);
    execFileSync('dpkg-deb', ['--root-owner-group', '--build', tree, deb], { stdio: 'pipe' });
    return deb;
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

/** Copy `debs` into `dir` and index them as a flat repository (Packages, Packages.gz, Release); returns `dir`. */
export function buildAptRepo(dir: string, debs: string[]): string {
  mkdirSync(dir, { recursive: true });
  for (const deb of debs) if (dirname(deb) !== dir) copyFileSync(deb, join(dir, basename(deb)));
  const packages = execFileSync('dpkg-scanpackages', ['--multiversion', '.'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  writeFileSync(join(dir, 'Packages'), packages);
  writeFileSync(join(dir, 'Packages.gz'), gzipSync(packages, { level: 9 }));
  writeFileSync(join(dir, 'Release'), release(dir, ['Packages', 'Packages.gz']));
  return dir;
}

// apt-ftparchive (apt-utils) is not installed here; a flat repository's Release needs only these fields.
function release(dir: string, files: string[]): string {
  const sums = (algo: string) => files.map((f) => ` ${createHash(algo).update(readFileSync(join(dir, f))).digest('hex')} ${statSync(join(dir, f)).size} ${f}`);
  return ['Origin: mesh', 'Label: mesh', `Date: ${new Date().toUTCString()}`, 'Architectures: all', 'MD5Sum:', ...sums('md5'), 'SHA256:', ...sums('sha256'), ''].join('\n');
}

/** The apt source line for a flat repository in folder `repo`. */
export function sourceLine(repo: string): string {
  return `deb [trusted=yes] file:${repo} ./\n`;
}

/** Make `root` a machine with a package manager: an empty dpkg database and apt's folders (and a source, when given). */
export function prepareDpkgRoot(root: string, repo?: string): string {
  for (const d of ['var/lib/dpkg/info', 'var/lib/dpkg/updates', 'var/lib/dpkg/triggers', 'etc/apt/sources.list.d', 'etc/apt/apt.conf.d', 'etc/apt/preferences.d', 'var/cache/apt/archives/partial', 'var/lib/apt/lists/partial', 'var/log/apt']) {
    mkdirSync(join(root, d), { recursive: true });
  }
  writeFileSync(join(root, 'var/lib/dpkg/status'), '');
  writeFileSync(join(root, 'var/lib/dpkg/available'), '');
  if (repo) writeFileSync(join(root, 'etc/apt/sources.list'), sourceLine(repo));
  return root;
}

/**
 * A folder of stand-ins for `commands` that append each run ("apt-get install NAME=VERSION",
 * without options) to the file named by $MESH_TEST_EXEC_LOG and then run the real program.
 * Put it first on PATH to see exactly which apt-get and dpkg-query calls the host made.
 */
export function loggingShims(dir: string, commands: string[]): string {
  mkdirSync(dir, { recursive: true });
  const words = 'for a in "$@"; do case "$a" in -s|[!-]*) [ "$prev" = -o ] || line="$line $a";; esac; prev="$a"; done';
  for (const cmd of commands) {
    writeFileSync(join(dir, cmd), `#!/bin/sh\nline=${cmd}; prev=\n${words}\necho "$line" >> "$MESH_TEST_EXEC_LOG"\nexec /usr/bin/${cmd} "$@"\n`);
    chmodSync(join(dir, cmd), 0o755);
  }
  return dir;
}
