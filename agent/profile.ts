/**
 * The profile a host reports at enrolment: what kind of machine this is. Facts about files
 * (os-release, package manager, init system) come from under the root; facts about the
 * running kernel and hardware come from the process, since a root folder has none of its own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { arch, cpus, release, totalmem } from 'node:os';
import type { Profile } from '../schema/report.js';
import { underRoot } from './paths.js';
import { HOST_VERSION } from '../core/version.js';

/** os-release fields, arch, kernel, cpus, memory, package manager and init system of the machine at `root`. */
export function collectProfile(root: string): Profile {
  const osRelease = readOsRelease(root);
  const has = (p: string) => existsSync(underRoot(root, p));
  return {
    os: osRelease.ID ?? 'unknown',
    osVersion: osRelease.VERSION_ID ?? 'unknown',
    osName: osRelease.PRETTY_NAME ?? 'unknown',
    osCodename: osRelease.VERSION_CODENAME || 'unknown',
    osFamily: osRelease.ID_LIKE?.split(/\s+/)[0] || osRelease.ID || 'unknown',
    arch: arch(),
    kernel: release(),
    cpus: cpus().length,
    memoryBytes: totalmem(),
    packageManager: hasPackageManager(root) ? 'dpkg' : 'none',
    initSystem: has('/run/systemd/system') ? 'systemd' : has('/lib/systemd/systemd') || has('/usr/lib/systemd/systemd') ? 'systemd (not running)' : 'unknown',
    hostVersion: HOST_VERSION,
  };
}

/** True when the machine at `root` has a dpkg database (the package manager mesh drives). */
export function hasPackageManager(root: string): boolean {
  return existsSync(underRoot(root, '/var/lib/dpkg/status'));
}

function readOsRelease(root: string): Record<string, string> {
  for (const p of ['/etc/os-release', '/usr/lib/os-release']) {
    try {
      const text = readFileSync(underRoot(root, p), 'utf8');
      return Object.fromEntries(
        text
          .split('\n')
          .map((l) => /^([A-Z_]+)=(.*)$/.exec(l))
          .filter((m): m is RegExpExecArray => m !== null)
          .map((m) => [m[1]!, m[2]!.replace(/^"(.*)"$/, '$1')]),
      );
    } catch {
      // try the next place
    }
  }
  return {};
}
