/**
 * File ownership by name, resolved from the root's own /etc/passwd and /etc/group. Each file
 * is read once per pass (the tables are kept in the pass's caches; `invalidateIdCache`, which
 * whoever adds or changes users and groups calls, forgets them). A name or id the cached table does not
 * know makes it look at the file again when the file has changed since it was read, so a user
 * added in this pass is never reported unknown.
 */
import { readFileSync, statSync } from 'node:fs';
import { MeshError } from '../../core/errors.js';
import { underRoot } from '../paths.js';
import type { PassCache, ResourceContext } from './handler.js';

/** Where ownership is looked up: a root, and the pass whose caches keep the tables read. */
export type PassScope = Pick<ResourceContext, 'root' | 'pass'>;

interface Table {
  stamp: string;
  byName: Map<string, number>;
  /** The first name of each id, in file order, after root. */
  byId: Map<number, string>;
}

/** Forget every /etc/passwd and /etc/group cached in `pass` (call after changing users or groups). */
export function invalidateIdCache(pass: PassCache): void {
  pass.idTables.clear();
}

type IdFile = '/etc/passwd' | '/etc/group';

/** The table for `file`; with `fresh`, re-read when the file changed since it was cached. */
function table({ root, pass }: PassScope, file: IdFile, fresh = false): Table {
  const tables = pass.idTables as Map<string, Table>;
  const cached = tables.get(root + file);
  if (cached && !fresh) return cached;
  const path = underRoot(root, file);
  const stamp = stampOf(path);
  if (cached && cached.stamp === stamp) return cached;
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // A root without the file knows only root.
  }
  const byName = new Map<string, number>([['root', 0]]);
  for (const line of text.split('\n')) {
    const [name, , id] = line.split(':');
    if (name && id !== undefined && /^\d+$/.test(id)) byName.set(name, Number(id));
  }
  const byId = new Map<number, string>();
  for (const [name, id] of byName) if (!byId.has(id)) byId.set(id, name);
  const made = { stamp, byName, byId };
  tables.set(root + file, made);
  return made;
}

/** What identifies this version of the file (inode, size, change times). */
function stampOf(path: string): string {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
  } catch (e) {
    return `error:${(e as NodeJS.ErrnoException).code}`;
  }
}

const fileOf = (kind: 'owner' | 'group'): IdFile => (kind === 'owner' ? '/etc/passwd' : '/etc/group');

/** The numeric id of user (`kind: 'owner'`) or group `name` on the machine at `scope.root`. */
export function lookupId(scope: PassScope, kind: 'owner' | 'group', name: string): number {
  const id = table(scope, fileOf(kind)).byName.get(name) ?? table(scope, fileOf(kind), true).byName.get(name);
  if (id === undefined) {
    const what = kind === 'owner' ? 'user' : 'group';
    throw new MeshError('E_UNKNOWN_' + what.toUpperCase(), `unknown ${what} '${name}' on this machine: declare it as a ${what} resource first, or fix the name`, {
      data: { name },
    });
  }
  return id;
}

/** Name of numeric id, for messages; falls back to the number. */
export function nameOf(scope: PassScope, kind: 'owner' | 'group', id: number): string {
  return table(scope, fileOf(kind)).byId.get(id) ?? table(scope, fileOf(kind), true).byId.get(id) ?? String(id);
}
