/**
 * `mesh-cli retire NODE`: commit an empty declaration for NODE (the files of its own folder,
 * wherever it sits under nodes/; its groups' files stay, they are other nodes' too) and mark
 * its node.yaml retired. Once pushed, the host removes everything it owns (restoring what was there
 * before mesh) and reports `retired` with an empty owned set. The identity is kept, so
 * those reports stay valid; `mesh-cli revoke NODE` is what withdraws it.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { MeshError } from '../../core/errors.js';
import { commitChange, openFleet, type Fleet } from '../fleet.js';
import { existingIdentity, identityFile, writeIdentity } from './token.js';
import { git } from '../git.js';
import { loadDeclaration } from '../../core/declaration/load.js';
import { placeOfDir } from '../../core/fleet/layout.js';
import { PLACEHOLDER_FACTS } from '../../schema/facts.js';
import { workingTree } from '../tree.js';
import { secretsOf } from '../secrets.js';

export interface Retired {
  node: string;
  commit: string;
  /** Declaration files removed, relative to the fleet repo. */
  removed: string[];
  /** When its declaration still has resources after the retire: the files of its groups (and nodes/) that make it up, which retire leaves (they are other nodes' too). */
  stillDeclaredBy?: string[];
  /** The secrets encrypted to the node ("FILE: NAME"): their values must change, since old commits hold blocks it can open. */
  secrets: string[];
}

/** Empty `node`'s declaration and mark it retired, in one commit. */
export async function retireNode(fleet: Fleet, node: string): Promise<Retired> {
  const { identity, dir } = await existingIdentity(fleet, node);
  const secrets = await secretsOf(fleet.dir, node); // before its own folder's files (its own secrets.yaml too) are removed
  const listed = await git(fleet.dir, ['ls-files', '-z', '--', `${dir}/`]);
  const removed = listed.split('\0').filter((f) => f && f !== `${dir}/node.yaml`);
  if (identity.retired && removed.length === 0) throw new MeshError('E_ALREADY_RETIRED', `${node} is already retired and its declaration is empty`);
  const commit = await commitChange(fleet.dir, [identityFile(fleet, dir), ...removed.map((f) => join(fleet.dir, f))], `retire ${node}: empty declaration`, () => {
    for (const f of removed) rmSync(join(fleet.dir, f), { force: true });
    writeIdentity(fleet, { ...identity, retired: true }, 'retire', dir);
  });
  const left = await declaredAbove(fleet, node, dir);
  return { node, commit, removed, ...(left.length ? { stillDeclaredBy: left } : {}), secrets };
}

/** The files above the node's own folder (its groups', nodes/) that still give it resources, as the checkout renders them. */
async function declaredAbove(fleet: Fleet, node: string, dir: string): Promise<string[]> {
  const loaded = await loadDeclaration(workingTree(fleet.dir), node, { facts: PLACEHOLDER_FACTS, place: placeOfDir(dir) });
  if (!loaded.ok || loaded.declaration.resources.length === 0) return [];
  return loaded.declaration.files.filter((f) => !f.startsWith('roles/') && !f.startsWith(`${dir}/`) && !f.endsWith('/vars.yaml') && !f.endsWith('/secrets.yaml'));
}

/** Register `retire NODE`. */
export function retireCommand(program: Command): void {
  program
    .command('retire')
    .description("commit an empty declaration for NODE and mark it retired: its host removes everything mesh put there")
    .argument('<node>', 'node name')
    .option('--json', 'print the result as JSON')
    .action(async (node: string, o: { json?: boolean }) => {
      const retired = await retireNode(await openFleet(process.cwd()), node);
      if (o.json) return void console.log(JSON.stringify(retired));
      console.log(`retired ${node}: committed ${retired.commit.slice(0, 12)}${retired.removed.length ? ` (removed ${retired.removed.join(', ')})` : ''}`);
      console.log(`push it (git push): the host removes everything mesh owns there and reports 'retired'; then 'mesh-cli revoke ${node}' withdraws its identity`);
      if (retired.secrets.length > 0) console.log(`change the value of every secret encrypted to ${node} ('mesh-cli secret set NAME --level PATH'; a rekey does not take back the blocks old commits hold):\n${retired.secrets.map((s) => `  - ${s}`).join('\n')}`);
      if (retired.stillDeclaredBy) console.log(`note: its groups' files (${retired.stillDeclaredBy.join(', ')}) still give ${node} resources; retire leaves them, as they are other nodes' too. Its host applies none of them while it is retired`);
    });
}
