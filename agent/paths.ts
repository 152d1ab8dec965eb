/**
 * A --root is a whole machine: every path a resource names, the package database and the
 * host's own config and state resolve under it. Production uses "/".
 */
import { lstatSync, readlinkSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize, resolve, sep } from 'node:path';
import { MeshError } from '../core/errors.js';
import { throughLink } from '../core/declaration/links.js';

export interface HostPaths {
  root: string;
  /** <root>/etc/mesh-host: config.json and the node key. */
  configDir: string;
  config: string;
  nodeKey: string;
  /** The node's age identity (age-keygen's format, 0600): secrets for this node are encrypted to its recipient. */
  ageIdentity: string;
  credential: string;
  /** <root>/var/lib/mesh-host: the store, the local git object store, the lock. */
  stateDir: string;
  store: string;
  gitdir: string;
  lock: string;
  /** The key of the HMACs that stand for the content of resources that read a secret (0600, made when first needed). */
  hmacKey: string;
}

/** The host's own files under `root`. */
export function hostPaths(root: string): HostPaths {
  const r = resolve(root);
  const configDir = join(r, 'etc/mesh-host');
  const stateDir = join(r, 'var/lib/mesh-host');
  return {
    root: r,
    configDir,
    config: join(configDir, 'config.json'),
    nodeKey: join(configDir, 'node.key'),
    ageIdentity: join(configDir, 'age-identity.txt'),
    credential: join(configDir, 'credential.json'),
    stateDir,
    store: join(stateDir, 'store.json'),
    gitdir: join(stateDir, 'git'),
    lock: join(stateDir, 'lock'),
    hmacKey: hmacKeyBeside(join(stateDir, 'store.json')),
  };
}

/** The HMAC key of the store at `store` (the state folder holds both). */
export function hmacKeyBeside(store: string): string {
  return join(dirname(store), 'secrets-hmac.key');
}

/** Absolute, with no empty, `.` or `..` part: such a path joined to a root stays under it as written. */
const PLAIN_PATH = /^(?:\/(?!\.\.?(?:\/|$))[^/\0]+)+$/;
/** resolve() of each absolute root seen (a pass asks for a path under the same root thousands of times). */
const resolvedRoots = new Map<string, string>();

/** The real location of an absolute machine path under `root`; refuses anything that escapes it. */
export function underRoot(root: string, machinePath: string): string {
  if (isAbsolute(root) && PLAIN_PATH.test(machinePath)) {
    let base = resolvedRoots.get(root);
    if (base === undefined) resolvedRoots.set(root, (base = resolve(root)));
    return base === sep ? machinePath : base + machinePath;
  }
  if (!isAbsolute(machinePath) || machinePath.split('/').includes('..')) {
    throw new MeshError('E_PATH', `path ${JSON.stringify(machinePath)} must be absolute and must not contain '..'`);
  }
  const base = resolve(root);
  const full = normalize(join(base, machinePath));
  if (full !== base && !full.startsWith(base === sep ? sep : base + sep)) {
    throw new MeshError('E_PATH', `path ${machinePath} escapes the root ${base}`);
  }
  return full;
}

/** Refuse a machine path whose parent folders include a symlink: a write must never follow one out of the root. */
export function assertNoSymlinkParents(root: string, machinePath: string): void {
  const parts = machinePath.split('/').filter(Boolean);
  let current = resolve(root);
  for (const part of parts.slice(0, -1)) {
    current = join(current, part);
    let isLink = false;
    try {
      isLink = lstatSync(current).isSymbolicLink();
    } catch {
      return; // a missing parent cannot be traversed
    }
    if (isLink) throw symlinkParent(root, machinePath, current);
  }
}

/**
 * The refusal of `machinePath`, whose parent folder `link` (a real path under `root`) is a symlink:
 * what the link leads to, and so where to declare the path instead.
 */
export function symlinkParent(root: string, machinePath: string, link: string): MeshError {
  const linkPath = link.slice(resolve(root).length) || '/';
  try {
    const target = readlinkSync(link);
    const real = throughLink(linkPath, target, machinePath);
    return new MeshError('E_PATH', `${machinePath}: the parent ${linkPath} is a symlink to ${target}, and mesh does not write through symlinks: declare it at the path the link leads to, ${real}`);
  } catch {
    return new MeshError('E_PATH', `${machinePath}: the parent ${linkPath} is a symlink, and mesh does not write through symlinks`);
  }
}
