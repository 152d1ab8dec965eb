/**
 * `mesh-cli revoke NODE`: bump NODE's generation without issuing a token. Once pushed, every
 * identity the node had is revoked: its reports show `revoked`, and a host still holding the
 * old identity stops applying. The new node.yaml names no git credential, so `mesh-cli serve`
 * refuses the node's credential as soon as the commit is pushed (it reads node.yaml from main
 * on every request). mesh cannot reach the grants a node holds elsewhere, so the command names
 * the other per-node credentials the operator must revoke at their providers.
 */
import type { Command } from 'commander';
import { fingerprint } from '../../core/sign/sshsig.js';
import type { NodeIdentity } from '../../schema/fleet.js';
import { commitChange, openFleet, originUrl, type Fleet } from '../fleet.js';
import { currentNodeKey } from './signers.js';
import { secretsOf } from '../secrets.js';
import { earlierKeys, existingIdentity, identityFile, withoutCredentials, writeIdentity } from './token.js';

export interface Revoked {
  node: string;
  generation: number;
  commit: string;
  /** What the operator must revoke by hand, one sentence each. */
  credentials: string[];
  /** The secrets encrypted to the node ("FILE: NAME"): their values must change, since old commits hold blocks it can open. */
  secrets: string[];
}

/** Revoke every identity of `node` with a new generation that has no token. */
export async function revokeNode(fleet: Fleet, node: string): Promise<Revoked> {
  const { identity: previous, dir } = await existingIdentity(fleet, node);
  const nodeKey = await currentNodeKey(fleet, node);
  const identity: NodeIdentity = { node, generation: previous.generation + 1, ...earlierKeys(previous), ...(previous.retired ? { retired: true } : {}) };
  const commit = await commitChange(fleet.dir, [identityFile(fleet, dir)], `revoke ${node}: generation ${identity.generation}, no token`, () => writeIdentity(fleet, identity, 'revoke', dir));
  const origin = await originUrl(fleet.dir, 'push');
  const url = origin ? withoutCredentials(origin) : 'the fleet repo';
  const credentials = [
    `the git credential ${node} pushes its reports with (refs/heads/reports/${node} at ${url}; on the machine in /etc/mesh-host/credential.json): mesh-cli serve refuses it at once, as soon as this commit is pushed; on any other git server, delete it there`,
    nodeKey
      ? `the node key ${fingerprint(nodeKey)} (${nodeKey.split(' ').slice(0, 2).join(' ')}): remove it wherever it was trusted by hand (authorized_keys, other allowed_signers files); 'mesh-cli signers' already leaves it out once this commit is pushed`
      : `the node key of ${node}: it has no valid report, so mesh does not know it; remove any key of ${node} trusted by hand`,
    `every secret a declaration gave ${node} (API tokens, passwords, cloud or deploy keys in ${dir}/${dir.split('/').length > 2 ? ", its groups' files" : ''} or its roles): rotate them at their providers, since the machine still holds copies`,
  ];
  return { node, generation: identity.generation, commit, credentials, secrets: await secretsOf(fleet.dir, node) };
}

/** Register `revoke NODE`. */
export function revokeCommand(program: Command): void {
  program
    .command('revoke')
    .description("bump NODE's generation without a token (revoking every identity it had) and list the credentials to revoke by hand")
    .argument('<node>', 'node name')
    .option('--json', 'print the result as JSON')
    .action(async (node: string, o: { json?: boolean }) => {
      const revoked = await revokeNode(await openFleet(process.cwd()), node);
      if (o.json) return void console.log(JSON.stringify(revoked));
      console.log(`revoked ${node}: generation ${revoked.generation} (no token) committed as ${revoked.commit.slice(0, 12)}; push it (git push) to make it take effect`);
      console.log(`then revoke these per-node credentials; mesh can revoke only the first, and only on its own server:`);
      for (const c of revoked.credentials) console.log(`  - ${c}`);
      if (revoked.secrets.length > 0) console.log(`and change the value of every secret encrypted to ${node} ('mesh-cli secret set NAME --level PATH'; a rekey does not take back the blocks old commits hold):\n${revoked.secrets.map((s) => `  - ${s}`).join('\n')}`);
    });
}
