/**
 * The inventory a host reports at enrolment, before it changes anything: what is already on
 * the machine that a declaration could touch. Read from the root's own files (the dpkg status
 * file, the systemd wants folders), so a simulated machine describes itself, not the test host.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import type { Inventory } from '../schema/report.js';
import { messageOf } from '../core/errors.js';
import { underRoot } from './paths.js';
import { newPass } from './resources/handler.js';
import { readNode } from './resources/node.js';

/** Installed packages, enabled services, and which paths of `declared` already exist on the machine at `root`. */
export function collectInventory(root: string, declared: Resource[]): Inventory {
  return { packages: installedPackages(root), services: enabledServices(root), declaredPaths: existingPaths(root, declared) };
}

/** name → version of every package that the root's dpkg status file says is installed (`name:arch` for a second architecture). */
export function installedPackages(root: string): Record<string, string> {
  const text = readOr(root, '/var/lib/dpkg/status');
  const packages: Record<string, string> = {};
  for (const stanza of text.split(/\n[ \t]*\n/)) {
    const field = (name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(stanza)?.[1]?.trim();
    const [name, version, status] = [field('Package'), field('Version'), field('Status')];
    if (!name || !version || !status || !/ installed$/.test(status)) continue;
    packages[name in packages ? `${name}:${field('Architecture') ?? 'unknown'}` : name] = version;
  }
  return Object.fromEntries(Object.entries(packages).sort(([a], [b]) => a.localeCompare(b)));
}

/** Services enabled on the machine: the .service units linked into /etc/systemd/system/*.wants and *.requires. */
export function enabledServices(root: string): string[] {
  const dir = underRoot(root, '/etc/systemd/system');
  const units = new Set<string>();
  for (const entry of listOr(dir)) {
    if (!/\.(wants|requires)$/.test(entry)) continue;
    for (const unit of listOr(`${dir}/${entry}`)) if (unit.endsWith('.service')) units.add(unit);
  }
  return [...units].sort();
}

/** The declared paths that already exist, with what they are (file, directory, symlink). */
function existingPaths(root: string, declared: Resource[]): Inventory['declaredPaths'] {
  const found: Inventory['declaredPaths'] = [];
  const scope = { root, pass: newPass() };
  for (const r of declared) {
    if (!('path' in r)) continue;
    try {
      const node = readNode(scope, r.path, false);
      if (node) found.push({ id: resourceId(r), kind: node.kind });
    } catch (e) {
      found.push({ id: resourceId(r), kind: `unreadable: ${messageOf(e)}` });
    }
  }
  return found;
}

function readOr(root: string, path: string): string {
  try {
    return readFileSync(underRoot(root, path), 'utf8');
  } catch {
    return '';
  }
}

function listOr(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
