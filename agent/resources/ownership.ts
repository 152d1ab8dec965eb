/** File ownership by name, resolved from the root's own /etc/passwd and /etc/group. */
import { readFileSync } from 'node:fs';
import { MeshError } from '../errors.js';
import { underRoot } from '../paths.js';

function table(root: string, file: '/etc/passwd' | '/etc/group'): Map<string, number> {
  let text = '';
  try {
    text = readFileSync(underRoot(root, file), 'utf8');
  } catch {
    // A root without the file knows only root.
  }
  const ids = new Map<string, number>([['root', 0]]);
  for (const line of text.split('\n')) {
    const [name, , id] = line.split(':');
    if (name && id !== undefined && /^\d+$/.test(id)) ids.set(name, Number(id));
  }
  return ids;
}

/** The numeric id of user (`kind: 'owner'`) or group `name` on the machine at `root`. */
export function lookupId(root: string, kind: 'owner' | 'group', name: string): number {
  const id = table(root, kind === 'owner' ? '/etc/passwd' : '/etc/group').get(name);
  if (id === undefined) {
    const what = kind === 'owner' ? 'user' : 'group';
    throw new MeshError('E_UNKNOWN_' + what.toUpperCase(), `unknown ${what} '${name}' on this machine: declare it as a ${what} resource first, or fix the name`, {
      data: { name },
    });
  }
  return id;
}

/** Name of numeric id, for messages; falls back to the number. */
export function nameOf(root: string, kind: 'owner' | 'group', id: number): string {
  for (const [name, n] of table(root, kind === 'owner' ? '/etc/passwd' : '/etc/group')) if (n === id) return name;
  return String(id);
}
