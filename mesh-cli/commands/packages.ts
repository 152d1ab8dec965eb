/**
 * `mesh-cli packages add FILE.deb [--dir DIR]`: put a package into the fleet's apt repository
 * (the folder `mesh-cli serve --packages DIR` serves under /packages/) and index it again: a
 * flat repository of Packages, Packages.gz (dpkg-scanpackages --multiversion, so that every
 * version stays installable and a host can be rolled back) and Release. The repository is not
 * signed: nodes name it with `[trusted=yes]`, and trust it because they trust the fleet server.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Command } from 'commander';
import { MeshError } from '../../core/errors.js';

export interface Added {
  package: string;
  version: string;
  architecture: string;
  /** The file in the repository folder. */
  file: string;
  /** False when the very same file was already there. */
  added: boolean;
  /** How many .deb files the repository indexes now. */
  indexed: number;
}

/** The apt source line a node uses for the repository served by `mesh-cli serve --packages` at `serverUrl`. */
export function sourceLine(serverUrl: string): string {
  return `deb [trusted=yes] ${serverUrl.replace(/\/?$/, '/')}packages/ ./`;
}

/** Copy `deb` into the repository folder `dir` and re-index it. A version already there with other contents is refused. */
export function addPackage(deb: string, dir: string): Added {
  if (!existsSync(deb)) throw new MeshError('E_PACKAGE_FILE', `${deb} does not exist: pass the .deb to add (build mesh-host's with npm run package:deb)`);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new MeshError('E_PACKAGE_DIR', `${dir} is not a folder: create it (mkdir -p ${dir}) or pass --dir, the folder given to mesh-cli serve --packages`);
  const [name = '', version = '', architecture = ''] = debFields(deb);
  const file = join(resolve(dir), `${name}_${version.replace(/^\d+:/, '')}_${architecture}.deb`);
  let added = true;
  if (existsSync(file)) {
    if (!readFileSync(file).equals(readFileSync(deb))) {
      throw new MeshError('E_PACKAGE_EXISTS', `${basename(file)} is already in ${dir} with other contents: apt keeps packages by version, so a published version must never change. Build the change with a new version (MESH_BUILD_VERSION=…)`);
    }
    added = false;
  } else {
    copyFileSync(deb, `${file}.tmp`);
    renameSync(`${file}.tmp`, file);
  }
  return { package: name, version, architecture, file, added, indexed: indexRepository(dir) };
}

/** Write Packages, Packages.gz and then Release for every .deb in `dir` (Release last: it names the others' checksums). */
export function indexRepository(dir: string): number {
  const packages = execFileSync('dpkg-scanpackages', ['--multiversion', '.'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  writeAtomic(join(dir, 'Packages'), packages);
  writeAtomic(join(dir, 'Packages.gz'), gzipSync(packages, { level: 9 }));
  const sums = (algo: string) => ['Packages', 'Packages.gz'].map((f) => ` ${createHash(algo).update(readFileSync(join(dir, f))).digest('hex')} ${statSync(join(dir, f)).size} ${f}`);
  writeAtomic(join(dir, 'Release'), ['Origin: mesh', 'Label: mesh', `Date: ${new Date().toUTCString()}`, 'Architectures: all amd64 arm64', 'MD5Sum:', ...sums('md5'), 'SHA256:', ...sums('sha256'), ''].join('\n'));
  return readdirSync(dir).filter((f) => f.endsWith('.deb')).length;
}

function debFields(deb: string): string[] {
  try {
    return execFileSync('dpkg-deb', ['--field', deb, 'Package', 'Version', 'Architecture'], { stdio: ['ignore', 'pipe', 'pipe'] }).toString().split('\n').map((l) => l.replace(/^\w+: /, '').trim());
  } catch (e) {
    throw new MeshError('E_PACKAGE_FILE', `${deb} is not a Debian package dpkg-deb can read: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`);
  }
}

function writeAtomic(path: string, data: Buffer | string): void {
  writeFileSync(`${path}.tmp`, data);
  renameSync(`${path}.tmp`, path);
}

/** Register `packages add`. */
export function packagesCommand(program: Command): void {
  program
    .command('packages')
    .description("the fleet's apt repository, served by mesh-cli serve --packages DIR")
    .command('add')
    .description('copy a .deb into the repository folder and index it again (Packages, Packages.gz, Release)')
    .argument('<file>', 'the .deb to add')
    .option('--dir <dir>', 'the repository folder (the one given to mesh-cli serve --packages)', 'packages')
    .option('--json', 'print the result as JSON')
    .action((file: string, o: { dir: string; json?: boolean }) => {
      const r = addPackage(file, o.dir);
      if (o.json) return void console.log(JSON.stringify(r));
      console.log(`${r.added ? 'added' : 'already there:'} ${r.package} ${r.version} (${r.architecture}) in ${o.dir}; ${r.indexed} package file(s) indexed`);
      console.log(`nodes use it through a file resource at /etc/apt/sources.list.d/mesh.list holding:\n  ${sourceLine('http://HOST:PORT/')}\n(the repository is unsigned: [trusted=yes] tells apt to accept it, which is safe only over a network you trust to reach the fleet server)`);
    });
}
