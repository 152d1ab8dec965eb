/**
 * Pre-flight: checks that need the whole declaration and the machine, made before anything
 * changes, so that bad input applies nothing. A file owned by a user nobody declares, or one this
 * pass deletes, fails the pass with every problem named by its resource (what the declaration
 * alone shows, such as two resources at one place, is refused when it renders). It also orders
 * the pass: a resource's dependencies go first, like Puppet's autorequire.
 * What a resource needs (the accounts it names, the files it watches) its handler says (`needs`).
 */
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import type { Step } from '../core/plan.js';
import { readGroup, readPasswd } from './resources/accounts.js';
import type { Need } from './resources/handler.js';
import { handlerFor } from './resources/index.js';

export interface PreflightProblem {
  id: string;
  message: string;
}

type Kind = 'user' | 'group';

/** Every problem in the declared steps, checked against the users and groups under `root`. */
export function preflight(steps: Step[], root: string): PreflightProblem[] {
  const declared = steps.flatMap((s) => (s.action === 'remove' ? [] : [s.resource]));
  return accountProblems(declared, steps, root);
}

function accountProblems(declared: Resource[], steps: Step[], root: string): PreflightProblem[] {
  // Accounts this pass deletes: declared absent, or created by mesh and no longer declared.
  const leaving = new Map<string, string>();
  for (const r of declared) if ((r.type === 'user' || r.type === 'group') && r.ensure === 'absent') leaving.set(`${r.type}:${r.name}`, `${resourceId(r)} is declared absent`);
  for (const s of steps) {
    if (s.action === 'remove' && (s.record.type === 'user' || s.record.type === 'group') && !s.record.prior?.existed) leaving.set(s.id, `${s.id} is no longer declared and is removed in this pass`);
  }
  // root is known even to a root without account files, as it is to file ownership (ownership.ts).
  const known: Record<Kind, Set<string>> = { user: new Set(['root', ...readPasswd(root).map((u) => u.name)]), group: new Set(['root', ...readGroup(root).map((g) => g.name)]) };
  for (const [id] of leaving) known[id.startsWith('user:') ? 'user' : 'group'].delete(id.slice(id.indexOf(':') + 1));
  for (const r of declared) {
    if ((r.type !== 'user' && r.type !== 'group') || r.ensure === 'absent') continue;
    known[r.type].add(r.name);
    if (r.type === 'user' && r.group === undefined) known.group.add(r.name); // its own group, where login.defs says USERGROUPS_ENAB
  }
  const problems: PreflightProblem[] = [];
  const check = (r: Resource, field: string, kind: Kind, name: string | undefined) => {
    if (name === undefined || known[kind].has(name)) return;
    const leaves = leaving.get(`${kind}:${name}`);
    const message = leaves ? `${field} '${name}' will not exist after this pass: ${leaves}` : `${field} '${name}' is neither a ${kind} on this machine nor declared as a ${kind} resource`;
    problems.push({ id: resourceId(r), message });
  };
  for (const r of declared) {
    if (absent(r)) continue;
    for (const need of needs(r)) {
      const kind = need.id.slice(0, need.id.indexOf(':'));
      if (kind === 'user' || kind === 'group') check(r, need.field, kind, need.id.slice(kind.length + 1));
    }
  }
  return problems;
}

/** Steps in declared order, except that what each needs goes first (the users and groups a resource names, the directory a path is in, a service's unit files and the files it restarts on, apt's configuration before a package); removals stay last. */
export function dependencyOrder(steps: Step[]): Step[] {
  const byId = new Map(steps.flatMap((s) => (s.action === 'remove' || absent(s.resource) ? [] : [[s.id, s] as const])));
  const paths = declaredPaths(steps);
  const placed = new Set<string>();
  const out: Step[] = [];
  const place = (s: Step) => {
    if (placed.has(s.id)) return;
    placed.add(s.id);
    if (s.action !== 'remove' && !absent(s.resource)) for (const id of neededIds(s.resource, paths)) if (byId.has(id)) place(byId.get(id)!);
    out.push(s);
  };
  steps.filter((s) => s.action !== 'remove').forEach(place);
  return [...out, ...steps.filter((s) => s.action === 'remove')];
}

const absent = (r: Resource) => 'ensure' in r && r.ensure === 'absent';

/** Every declared file, directory and link of `steps` (not being removed): its path → its id. */
export function declaredPaths(steps: Step[]): Map<string, string> {
  const paths = new Map<string, string>();
  for (const s of steps) if (s.action !== 'remove' && !absent(s.resource) && 'path' in s.resource) paths.set(s.resource.path, s.id);
  return paths;
}

/** The ids of what `r` needs: what its handler names (needs), and every declared path under a folder it needs whole (needsUnder; `paths`: declaredPaths). */
export function neededIds(r: Resource, paths: Map<string, string>): string[] {
  const ids = needs(r).map((n) => n.id);
  for (const folder of needsUnderOf(r)) for (const [path, id] of paths) if (path.startsWith(folder)) ids.push(id);
  return ids;
}

function needsUnderOf(r: Resource): string[] {
  try {
    return handlerFor(r).needsUnder?.(r) ?? [];
  } catch {
    return [];
  }
}

/** What `r` needs, as its handler says; a type without a handler needs nothing (it fails with its own error). */
function needs(r: Resource): Need[] {
  try {
    return handlerFor(r).needs?.(r) ?? [];
  } catch {
    return [];
  }
}
