/**
 * `mesh-cli signers [--out FILE]`: the allowed_signers file of the fleet's current node
 * identities — for each node, the key of its latest report whose signature is valid, with
 * the node name as principal — so that anyone can check reports with the git binary:
 *
 *   git -c gpg.format=ssh -c gpg.ssh.allowedSignersFile=FILE verify-commit origin/reports/NODE
 *   ssh-keygen -Y verify -f FILE -I NODE -n mesh-report -s status.json.sig < status.json
 */
import { checkOutFile, writeOutFile } from '../out-file.js';
import type { Command } from 'commander';
import { openFleet, type Fleet } from '../fleet.js';
import { fetchReports, lastReports, reportedNodes, trusted } from '../reports.js';

export interface Signers {
  /** One allowed_signers line per node with a valid last report: "NODE ssh-ed25519 AAAA…". */
  lines: string[];
  /** Nodes left out, and why (their last report is not valid). */
  skipped: Array<{ node: string; reason: string }>;
}

/** The current node identities of `fleet` as allowed_signers lines (fetching reports first unless `fetch` is false). */
export async function currentSigners(fleet: Fleet, opts: { fetch: boolean }): Promise<Signers> {
  if (opts.fetch) await fetchReports(fleet);
  const nodes = (await reportedNodes(fleet)).sort();
  const reports = await lastReports(fleet, nodes);
  const signers: Signers = { lines: [], skipped: [] };
  for (const node of nodes) {
    const verified = reports.get(node)!;
    const report = trusted(verified);
    if (report) signers.lines.push(`${node} ${report.nodeKey.split(' ').slice(0, 2).join(' ')}`);
    else signers.skipped.push({ node, reason: `last report is ${verified.signature}${verified.reason ? `: ${verified.reason}` : ''}` });
  }
  return signers;
}

/** The node key of `node`'s current identity, when its last report is valid. */
export async function currentNodeKey(fleet: Fleet, node: string): Promise<string | null> {
  const line = (await currentSigners(fleet, { fetch: true }).catch(() => ({ lines: [] as string[] }))).lines.find((l) => l.startsWith(`${node} `));
  return line ? line.slice(node.length + 1) : null;
}

/** Register `signers [--out FILE]`. */
export function signersCommand(program: Command): void {
  program
    .command('signers')
    .description('write the allowed_signers file of the current node identities (for git verify-commit and ssh-keygen -Y verify)')
    .option('--out <file>', 'write to FILE instead of stdout')
    .option('--no-fetch', 'use the report branches already fetched')
    .action(async (o: { out?: string; fetch: boolean }) => {
      if (o.out) checkOutFile(o.out, '--out');
      const signers = await currentSigners(await openFleet(process.cwd()), { fetch: o.fetch });
      const text = ['# allowed_signers of the fleet\'s current node identities, written by mesh-cli signers', ...signers.lines, ''].join('\n');
      if (o.out) writeOutFile(o.out, text, '--out');
      else process.stdout.write(text);
      if (o.out) console.error(`${signers.lines.length} node identities written to ${o.out}`);
      for (const s of signers.skipped) console.error(`${s.node}: left out, ${s.reason}`);
    });
}
