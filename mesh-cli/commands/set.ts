/**
 * `mesh-cli set FILE KEY=VALUE…`: the one write a deploy pipeline makes, e.g.
 * `mesh-cli set nodes/web/vars.yaml app_version=1.4.2`. The file is changed through the yaml
 * Document API, so its comments, key order and quoting survive; a dotted KEY reaches into
 * nested maps, and into lists by number (`ports.1`: the second item; one past the last adds one). VALUE is read as YAML (`8080` a number, `true` a boolean, `[a, b]` a list,
 * `null` unsets), except that a value that would lose its text as a number (`1.10`, `0644`)
 * stays a string, and a value replacing a string stays a string. In a fleet checkout, a change
 * that would give the file a problem it did not have (validate-checks.ts fileProblems: mesh.yaml,
 * a role, a vars.yaml, a declaration file) is refused, and nothing is written.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import type { Command } from 'commander';
import { isMap, isScalar, isSeq, parse, parseDocument, YAMLMap, type Document, type YAMLSeq } from 'yaml';
import { InvalidInputError, MeshError, type Problem } from '../../core/errors.js';
import { openFleet, topOf } from '../fleet.js';
import { formatPlanText } from '../plan-format.js';
import type { PlanResult } from '../plan-result.js';
import { tryFetchReports } from '../reports.js';
import { resolveCommit, workingCommit } from '../tree.js';
import { fileProblems } from '../validate-checks.js';
import { planFleet } from './plan.js';

export interface SetChange {
  key: string;
  before: unknown;
  after: unknown;
}

/** What a file's text would make of it as a fleet file (null: nothing mesh checks). */
type FileCheck = (text: string) => Promise<Problem[] | null>;

/**
 * Apply `assignments` ("KEY=VALUE") to the YAML file `file`; what changed, key by key. The file is
 * written only when something changed, and, with `check`, only when the change adds no problem.
 */
export async function setValues(file: string, assignments: string[], check?: FileCheck): Promise<{ changes: SetChange[]; created: boolean }> {
  const created = !existsSync(file);
  if (created && !existsSync(dirname(file))) throw new MeshError('E_SET_FILE', `${file} does not exist, and neither does its folder: check the path (e.g. nodes/web/vars.yaml)`);
  const text = created ? '' : readFileSync(file, 'utf8');
  const doc: Document = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) throw new MeshError('E_SET_FILE', `${file} is not valid YAML (${doc.errors[0]!.message.split('\n')[0]}): fix it first`);
  if (doc.contents === null) doc.contents = new YAMLMap();
  if (!isMap(doc.contents)) throw new MeshError('E_SET_FILE', `${file} is not a map of keys to values, so KEY=VALUE cannot be set in it`);
  const changes = assignments.map((a) => assign(doc, a, file));
  const changed = changes.filter((c) => JSON.stringify(c.before) !== JSON.stringify(c.after));
  if (changed.length === 0) return { changes, created: false };
  const next = doc.toString();
  const added = check ? await problemsAdded(check, created ? null : text, next) : [];
  if (added.length > 0) throw new InvalidInputError(`${file}, as this change would leave it,`, added, 'nothing was written: give a value of the form the problem names, or fix the file first');
  writeFileSync(file, next);
  return { changes, created };
}

/** The problems `after` has that `before` had not (by file and message: a change may move lines). */
async function problemsAdded(check: FileCheck, before: string | null, after: string): Promise<Problem[]> {
  const now = (await check(after)) ?? [];
  if (now.length === 0) return [];
  const key = (p: Problem) => `${p.file}\0${p.message}`;
  const was = new Set(before === null ? [] : ((await check(before)) ?? []).map(key));
  return now.filter((p) => !was.has(key(p)));
}

/** How `file` is checked: as a fleet file when it lies in a fleet checkout (one with mesh.yaml at its top). */
async function fleetFileCheck(file: string): Promise<FileCheck | undefined> {
  if (!existsSync(dirname(file))) return undefined; // setValues says so
  const top = await topOf(dirname(file));
  if (!top || !existsSync(join(top, 'mesh.yaml'))) return undefined;
  // git gives the top with symbolic links resolved: so must the file's folder be, to be placed under it.
  const path = relative(top, join(realpathSync(dirname(file)), basename(file))).split(sep).join('/');
  return (text) => fileProblems(path, text);
}

function assign(doc: Document, assignment: string, file: string): SetChange {
  const eq = assignment.indexOf('=');
  if (eq <= 0) throw new MeshError('E_SET_ARG', `'${assignment}' is not KEY=VALUE (e.g. app_version=1.4.2)`);
  const key = assignment.slice(0, eq);
  const names = key.split('.');
  if (names.some((p) => p === '')) throw new MeshError('E_SET_ARG', `'${key}' is not a key: use names joined by dots, e.g. tls.port`);
  const raw = assignment.slice(eq + 1);
  const path: Array<string | number> = [names[0]!];
  for (let i = 1; i < names.length; i++) {
    const parent = doc.getIn(path, true);
    path.push(isSeq(parent) ? itemIndex(parent, names[i]!, names.slice(0, i).join('.'), key, file) : names[i]!);
    if (parent !== undefined && !isMap(parent) && !isSeq(parent)) throw new MeshError('E_SET_ARG', `${names.slice(0, i).join('.')} in ${file} is not a map, so ${key} cannot be set`);
  }
  const node = doc.getIn(path, true);
  const before = doc.getIn(path) as unknown;
  const after = valueOf(raw, isScalar(node) && typeof node.value === 'string');
  if (isScalar(node)) node.value = after; // keeps the scalar's quoting style and comment
  else doc.setIn(path, after);
  return { key, before: before === undefined ? undefined : toJS(before), after };
}

/** The index `step` names in the list `list` (`at`, in `key`): an item it has, or the one after its last (which adds one). */
function itemIndex(list: YAMLSeq, step: string, at: string, key: string, file: string): number {
  const count = list.items.length;
  if (!/^\d+$/.test(step)) throw new MeshError('E_SET_ARG', `${at} in ${file} is a list, so ${key} cannot be set: name its item by number (${at}.0 is the first)`);
  const index = Number(step);
  if (index > count) {
    const give = count === 0 ? 'give 0 to add one' : count === 1 ? 'give 0 to change it, or 1 to add one after it' : `give 0 to ${count - 1} to change one, or ${count} to add one after the last`;
    throw new MeshError('E_SET_ARG', `${at} in ${file} has ${count} item${count === 1 ? '' : 's'}, so ${key} cannot be set: ${give}`);
  }
  return index;
}

function valueOf(raw: string, wasString: boolean): unknown {
  if (wasString) return raw;
  let value: unknown;
  try {
    value = parse(raw);
  } catch {
    return raw;
  }
  if (typeof value === 'number' && String(value) !== raw.trim()) return raw; // 1.10, 0644: the text is the value
  return value === undefined ? raw : value;
}

function toJS(v: unknown): unknown {
  return v !== null && typeof v === 'object' && 'toJSON' in v ? (v as { toJSON(): unknown }).toJSON() : v;
}

function show(v: unknown): string {
  return v === undefined ? '(not set)' : JSON.stringify(v);
}

/** Register `set FILE KEY=VALUE…`. */
export function setCommand(program: Command): void {
  program
    .command('set')
    .description("change values in a YAML file (vars, versions), keeping its comments and layout: a pipeline's one write")
    .argument('<file>', 'the YAML file, e.g. nodes/web/vars.yaml')
    .argument('<assignments...>', 'KEY=VALUE, KEY a dotted path into nested maps and lists (ports.0: the first item)')
    .option('--json', 'print {file, created, changes:[{key, before, after}]} as JSON (with --plan, the plan too)')
    .option('--plan', 'then print the plan of the working tree against HEAD: which nodes the change touches, and how')
    .option('--no-fetch', 'with --plan: use the report branches already fetched')
    .action(async (file: string, assignments: string[], o: { json?: boolean; plan?: boolean; fetch: boolean }) => {
      const path = resolve(file);
      const { changes, created } = await setValues(path, assignments, await fleetFileCheck(path));
      const plan = o.plan ? await planWorkingTree(o.fetch) : null;
      if (o.json) return console.log(JSON.stringify({ file, created, changes, ...(plan ? { plan } : {}) }));
      if (created) console.log(`${file}: created`);
      for (const c of changes) console.log(JSON.stringify(c.before) === JSON.stringify(c.after) ? `${file}: ${c.key} = ${show(c.after)} (unchanged)` : `${file}: ${c.key}: ${show(c.before)} -> ${show(c.after)}`);
      if (plan) console.log(`\n${formatPlanText(plan, new Date())}`);
    });
}

/** The plan from HEAD to the working tree as it now is (the change just made, and any other uncommitted one). */
async function planWorkingTree(fetch: boolean): Promise<PlanResult> {
  const fleet = await openFleet(process.cwd());
  const notes: string[] = [];
  const fetchNote = fetch ? await tryFetchReports(fleet) : null;
  if (fetchNote) notes.push(fetchNote);
  const plan = await planFleet(fleet, await resolveCommit(fleet.dir, 'HEAD'), await workingCommit(fleet.dir), notes, true);
  if (plan.nodes.some((n) => n.problems)) process.exitCode = 1;
  return plan;
}
