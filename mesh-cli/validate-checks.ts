/**
 * Every check `mesh-cli validate` makes over one tree of the fleet repo, each problem with
 * file, line and column: mesh.yaml, every role, the layout of nodes/ (groups and nodes, names
 * unique across the tree), every node's name and node.yaml, and every node's declaration
 * through the same loader the host uses (templates, schemas, includes that resolve, duplicate
 * identities, paths, sources), rendered with placeholder facts; the files of a group no node
 * is in yet are rendered for a placeholder node there. Reports are passed in, so that a node
 * given resources while its last valid report says it is ineligible is caught here too.
 */
import { loadDeclaration } from '../core/declaration/load.js';
import { asWritten } from '../core/declaration/render-with.js';
import { schemas } from '../core/declaration/schemas.js';
import { NODES, NOT_DECLARATIONS, placeOfDir, readLayout, type FleetLayout, type NodePlace } from '../core/fleet/layout.js';
import { PLACEHOLDER_FACTS } from '../schema/facts.js';
import type { Problem } from '../core/errors.js';
import { NODE_NAME, NodeIdentity } from '../schema/fleet.js';
import { fleetSettings } from '../core/trust/check.js';
import { loadYaml, positionIn, readYaml } from '../core/load.js';
import type { FleetTree } from './tree.js';
import { nodeSecrets } from '../core/secrets/levels.js';
import { cannotRead, type CurrentRecipients } from '../core/secrets/recipients.js';

/** What `validate` found in one tree. */
export interface Checked {
  problems: Problem[];
  /** What looks wrong but is not refused (e.g. a literal body that holds `{{ vars.`). */
  warnings: Problem[];
  nodes: number;
  roles: number;
  /** Nodes whose declaration has resources, for the eligibility check. */
  withResources: string[];
  /** Each node whose declaration reads secrets: where it sits and the names, for the recipients check (checkSecretRecipients). */
  readsSecrets: Map<string, { place: NodePlace; names: string[] }>;
}

const YAML = /\.ya?ml$/;

/** Check `tree`; `ineligible` maps node → why its last valid report says it may not be given resources. */
export async function checkTree(tree: FleetTree, ineligible: Map<string, string> = new Map()): Promise<Checked> {
  const problems: Problem[] = [];
  const meshYaml = await tree.read('mesh.yaml');
  if (meshYaml === null) problems.push({ file: 'mesh.yaml', line: 1, col: 1, message: 'mesh.yaml is missing: every fleet repo has one (mesh-cli init writes it)' });
  else problems.push(...problemsOf(fleetSettings(meshYaml)));

  const roles = await filesUnder(tree, 'roles');
  for (const role of roles) problems.push(...(await roleProblems((await tree.read(role)) ?? '', role)));

  const layout = await readLayout(tree);
  for (const p of layout.problems) problems.push({ ...p, file: await fileIn(tree, p.file) });
  const warnings: Problem[] = [];
  const withResources: string[] = [];
  const readsSecrets = new Map<string, { place: NodePlace; names: string[] }>();
  for (const [node, place] of layout.nodes) {
    const { dir } = place;
    if (!NODE_NAME.test(node)) {
      problems.push({ file: await fileIn(tree, dir), line: 1, col: 1, message: `'${node}' is not a valid node name (lower-case letters, digits and -, at most 63 characters): rename the folder ${dir}/` });
    }
    const identity = await checkIdentity(tree, node, dir, problems);
    const loaded = await loadDeclaration(tree, node, { facts: PLACEHOLDER_FACTS, place });
    if (!loaded.ok) {
      problems.push(...loaded.problems);
      continue;
    }
    warnings.push(...(loaded.declaration.warnings ?? []));
    if (loaded.declaration.resources.length === 0) continue;
    withResources.push(node);
    const names = [...new Set(Object.values(loaded.declaration.readSecrets ?? {}).flat())].sort();
    if (names.length > 0 && !identity?.retired) readsSecrets.set(node, { place, names });
    // Only the node's own files are its to empty: its groups' files give the other nodes of the group theirs.
    const why = identity?.retired ? 'it is retired (node.yaml says retired: true)' : ineligible.get(node);
    const own = why ? await ownResourceAt(tree, dir) : null;
    if (own) problems.push({ ...own, message: `node ${node} is given resources by ${dir}/, but ${why}; it may only have an empty declaration: remove them (its groups' files are not applied to it)` });
  }
  // A group's files are checked even before a node is in it: rendered for a placeholder node there.
  for (const place of placeholders(layout)) {
    const rendered = await loadDeclaration(tree, place.node, { facts: PLACEHOLDER_FACTS, place });
    if (rendered.ok) warnings.push(...(rendered.declaration.warnings ?? []));
    else problems.push(...rendered.problems);
  }
  return { problems: dedupe(problems), warnings: dedupe(warnings), nodes: layout.nodes.size, roles: roles.length, withResources, readsSecrets };
}

/**
 * From the recipient lists alone: every secret a node reads lists the node's current recipient
 * (`current`, from the newest verified reports), each failure at the secrets.yaml entry. Without
 * reports (`current` null) it checks only that the node is listed at all, and says so.
 */
export async function checkSecretRecipients(tree: FleetTree, reads: Checked['readsSecrets'], current: CurrentRecipients | null): Promise<{ problems: Problem[]; notes: string[] }> {
  const problems: Problem[] = [];
  for (const [node, { place, names }] of reads) {
    const { secrets } = await nodeSecrets((p) => tree.read(p), place);
    for (const name of names) {
      const placed = secrets.get(name);
      const why = placed ? cannotRead(placed, node, current ?? new Map()) : null;
      if (placed && why) problems.push({ file: placed.file, line: placed.line, col: placed.col, message: why });
    }
  }
  const notes = reads.size > 0 && current === null ? ['no reports fetched: checked that every node reading a secret is among its recipients, but could not compare the recipients with the ones the nodes report now'] : [];
  return { problems: dedupe(problems), notes };
}

/** The name of the node validate renders a group's files for when no node is in the group yet. */
export const PLACEHOLDER_NODE = 'placeholder';

/**
 * A placeholder node in each innermost group that has no node at or below it (and in nodes/
 * itself when the fleet has no node yet), so that every level's files are rendered at least once.
 */
function placeholders(layout: FleetLayout): NodePlace[] {
  const places = [...layout.nodes.values()];
  const occupied = (group: string) => places.some((p) => p.groups.includes(group));
  const innermost = (group: string) => !layout.groups.some((g) => g.startsWith(`${group}/`));
  const empty = layout.groups.filter((g) => !occupied(g) && innermost(g));
  const dirs = [...(places.length === 0 ? [NODES] : []), ...empty.map((g) => `${NODES}/${g}`)];
  return dirs.map((dir) => placeOfDir(`${dir}/${PLACEHOLDER_NODE}`));
}

/** A problem at a folder is shown at its node.yaml or first YAML file (a place an editor and a CI annotation can open). */
async function fileIn(tree: FleetTree, path: string): Promise<string> {
  const files = await tree.list(path);
  if (files === null) return path;
  const first = files.includes('node.yaml') ? 'node.yaml' : (files.find((f) => YAML.test(f)) ?? files[0]);
  return first ? `${path}/${first}` : path;
}

async function checkIdentity(tree: FleetTree, node: string, dir: string, problems: Problem[]): Promise<NodeIdentity | null> {
  const file = `${dir}/node.yaml`;
  const text = await tree.read(file);
  if (text === null) return null;
  const loaded = loadYaml(text, file, NodeIdentity);
  if (!loaded.ok) {
    problems.push(...loaded.problems);
    return null;
  }
  if (loaded.value.node !== node) {
    problems.push({ file, ...positionIn(text, ['node']), message: `node.yaml says node '${loaded.value.node}' but it is in ${dir}/: a node's identity must be in its own folder (issue a token with mesh-cli token issue ${node})` });
  }
  return loaded.value;
}

/** Where the node's own files first give it something (an include or a resource), or null when they give nothing. */
async function ownResourceAt(tree: FleetTree, dir: string): Promise<Omit<Problem, 'message'> | null> {
  const files = ((await tree.list(dir)) ?? []).filter((f) => YAML.test(f) && !NOT_DECLARATIONS.has(f)).sort();
  for (const name of files) {
    const file = `${dir}/${name}`;
    const text = (await tree.read(file)) ?? '';
    for (const key of ['include', 'resources']) {
      const at = positionIn(text, [key, 0]);
      if (at.line !== 1 || at.col !== 1) return { file, ...at }; // 1:1 is "not there": a list item never starts a file
    }
  }
  return null;
}

/** Every YAML file under `dir`, at any depth. */
async function filesUnder(tree: FleetTree, dir: string): Promise<string[]> {
  const here = ((await tree.list(dir)) ?? []).filter((f) => YAML.test(f)).map((f) => `${dir}/${f}`);
  const deeper = await Promise.all((await tree.folders(dir)).map((f) => filesUnder(tree, `${dir}/${f}`)));
  return [...here, ...deeper.flat()];
}

function problemsOf(loaded: { ok: true } | { ok: false; problems: Problem[] }): Problem[] {
  return loaded.ok ? [] : loaded.problems;
}

/**
 * A role's problems as a file on its own: its shape, and every value it holds as written. A value
 * its parameters or variables render (`name: reload-{{ params.app }}`, `mode: "{{ params.mode }}"`)
 * has its form checked where a node includes the role, rendered (checkTree renders every node and
 * group); here it would be refused for its braces.
 */
function roleProblems(text: string, role: string): Promise<Problem[]> {
  return asWrittenText(text, role, 'RoleFile');
}

/** A declaration or role file's problems as written (asWritten), or why it does not read as YAML. */
async function asWrittenText(text: string, file: string, schema: 'DeclarationFile' | 'RoleFile'): Promise<Problem[]> {
  const read = readYaml(text, file);
  return read.ok ? asWritten(read, schema, () => Promise.resolve(schemas)) : read.problems;
}

/**
 * The problems `text` has as the fleet file at `path` (from the fleet's root), checked as the file
 * alone by what its place makes it: mesh.yaml, a role, a level's vars.yaml, a declaration file
 * under nodes/ (its values as written; checkTree renders every node). Null for a file mesh does
 * not read this way (node.yaml and secrets.yaml are written by their own commands).
 */
export async function fileProblems(path: string, text: string): Promise<Problem[] | null> {
  if (path === 'mesh.yaml') return problemsOf(fleetSettings(text));
  if (!YAML.test(path)) return null;
  if (path.startsWith('roles/')) return roleProblems(text, path);
  if (!path.startsWith(`${NODES}/`)) return null;
  const name = path.slice(path.lastIndexOf('/') + 1);
  if (name === 'vars.yaml') return problemsOf(schemas.readVars(text, path));
  return NOT_DECLARATIONS.has(name) ? null : asWrittenText(text, path, 'DeclarationFile');
}

/** A role included by many nodes reports its problems once; sorted by file, line, column. */
function dedupe(problems: Problem[]): Problem[] {
  const seen = new Map(problems.map((p) => [`${p.file}:${p.line}:${p.col}:${p.message}`, p]));
  return [...seen.values()].sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.col - b.col);
}
