/**
 * The facts templates read (`facts.*`): what the host observes about itself that does not churn.
 * Under `--root DIR` the hostname is DIR's /etc/hostname when it has one, so that simulated
 * machines on one computer differ; the rest comes from the profile.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Facts } from '../schema/facts.js';
import { underRoot } from './paths.js';
import { collectProfile } from './profile.js';

/** The facts of the machine at `root`. */
export function collectFacts(root: string): Facts {
  const profile = collectProfile(root);
  return {
    hostname: machineName(root),
    os: profile.os,
    osVersion: profile.osVersion,
    osCodename: profile.osCodename ?? 'unknown',
    osFamily: profile.osFamily ?? 'unknown',
    arch: profile.arch,
    cpus: profile.cpus,
    memoryMb: Math.round(profile.memoryBytes / 2 ** 20),
  };
}

function machineName(root: string): string {
  try {
    const name = readFileSync(underRoot(root, '/etc/hostname'), 'utf8').trim();
    if (name) return name;
  } catch {
    // no /etc/hostname under the root: the kernel's name
  }
  return hostname();
}
