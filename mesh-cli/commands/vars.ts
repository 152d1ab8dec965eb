/**
 * `mesh-cli vars NODE [KEY] [--explain] [--json] [--rev REV]`: a node's variables as its
 * templates see them (`vars.*`), read from the checkout as it is on disk (or from a commit), and
 * with --explain the file that set each value and the files whose value it replaced.
 */
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { InvalidInputError, MeshError } from '../../core/errors.js';
import { nodeVars, type LayeredVars } from '../../core/declaration/vars.js';
import { readLayout, type NodePlace } from '../../core/fleet/layout.js';
import { notANode } from '../layout.js';
import { openFleet, type Fleet } from '../fleet.js';
import { commitTree, resolveCommit, workingTree, type FleetTree } from '../tree.js';

export interface NodeVars {
  place: NodePlace;
  vars: LayeredVars;
}

/** `node`'s variables in `tree`; an error naming the nodes there are when it is not one of them. */
export async function varsOf(tree: FleetTree, node: string): Promise<NodeVars> {
  const layout = await readLayout(tree);
  const place = layout.nodes.get(node);
  if (!place) throw notANode(node, layout.nodes.keys(), 'E_NO_NODE');
  const { vars, problems } = await nodeVars((path) => tree.read(path), place);
  if (problems.length > 0) throw new InvalidInputError(`the variables of ${node}`, problems);
  return { place, vars };
}

/** The text `vars` prints: YAML of the values, or with `explain` each value followed by where it came from. */
export function formatVars({ place, vars }: NodeVars, key: string | undefined, explain: boolean): string {
  const names = key === undefined ? [...new Set([...Object.keys(vars.values), ...(explain ? Object.keys(vars.unset) : [])])].sort() : [key];
  if (key !== undefined && !(key in vars.values) && !(explain && key in vars.unset)) {
    throw new MeshError('E_NO_VAR', `${place.node} has no variable ${key}${key in vars.unset ? ` (unset by ${vars.unset[key]!.file})` : ''}; its variables are: ${Object.keys(vars.values).sort().join(', ') || 'none'}`);
  }
  if (!explain) return key === undefined ? stringify(vars.values) : stringify(vars.values[key]);
  const out: string[] = [`# ${place.node} (${place.dir}/): levels nodes/${place.groups.map((g) => `, nodes/${g}/`).join('')}, ${place.dir}/`];
  for (const name of names) {
    const origin = vars.origins[name];
    const replaced = (o: { replaced: string[] }) => (o.replaced.length ? `; replaces ${o.replaced.join(', ')}` : '');
    if (origin) out.push(`${stringify({ [name]: vars.values[name] }).trimEnd()}\n  # set by ${origin.file}${replaced(origin)}`);
    else out.push(`# ${name}: unset (null) by ${vars.unset[name]!.file}${replaced(vars.unset[name]!)}`);
  }
  return out.join('\n') + '\n';
}

/** Register `vars NODE [KEY]`. */
export function varsCommand(program: Command): void {
  program
    .command('vars')
    .description("a node's variables as its templates see them (vars.*), from the checkout on disk")
    .argument('<node>', 'node name')
    .argument('[key]', 'one variable')
    .option('--explain', 'say which vars.yaml set each value and which it replaced')
    .option('--rev <rev>', 'read a commit instead of the checkout on disk')
    .option('--json', 'print {node, dir, groups, values, origins, unset} as JSON')
    .action(async (node: string, key: string | undefined, o: { explain?: boolean; rev?: string; json?: boolean }) => {
      const fleet: Fleet = await openFleet(process.cwd());
      const tree = o.rev ? await commitTree(fleet.dir, await resolveCommit(fleet.dir, o.rev)) : workingTree(fleet.dir);
      const found = await varsOf(tree, node);
      if (o.json) console.log(JSON.stringify({ node, dir: found.place.dir, groups: found.place.groups, values: found.vars.values, origins: found.vars.origins, unset: found.vars.unset }));
      else process.stdout.write(formatVars(found, key, o.explain ?? false));
    });
}
