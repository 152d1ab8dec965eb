/**
 * The fleet's secrets as mesh-cli reads them from a tree: every secrets.yaml at every level, and
 * each node's current recipient from its newest verified report (reports.ts, as status reads
 * them). Shared by `secret`, `validate`, `plan`, `retire` and `revoke`; nothing here decrypts.
 */
import { readLayout, type FleetLayout } from '../core/fleet/layout.js';
import type { Problem } from '../core/errors.js';
import { readSecrets, SECRETS_FILE, type PlacedSecret } from '../core/secrets/levels.js';
import { encryptedTo, type CurrentRecipients } from '../core/secrets/recipients.js';
import type { Fleet } from './fleet.js';
import { lastReports, reportedNodes, trusted } from './reports.js';
import { workingTree, type FleetTree } from './tree.js';

/** Every level folder of `layout`: nodes/, each group's, each node's. */
export function levelsOfLayout(layout: FleetLayout): string[] {
  return ['nodes', ...layout.groups.map((g) => `nodes/${g}`), ...[...layout.nodes.values()].map((p) => p.dir)];
}

/** Every secret entry in `tree`, file by file, with the problems of files that do not read. */
export async function allSecrets(tree: FleetTree, layout?: FleetLayout): Promise<{ layout: FleetLayout; byFile: Map<string, PlacedSecret[]>; problems: Problem[] }> {
  const l = layout ?? (await readLayout(tree));
  const byFile = new Map<string, PlacedSecret[]>();
  const problems: Problem[] = [];
  for (const level of levelsOfLayout(l)) {
    const file = `${level}/${SECRETS_FILE}`;
    const text = await tree.read(file);
    if (text === null) continue;
    const read = readSecrets(text, file);
    if (!read.ok) problems.push(...read.problems);
    else byFile.set(file, [...read.entries.values()].filter((e): e is PlacedSecret => e !== null));
  }
  return { layout: l, byFile, problems };
}

/** Each reported node's recipient in its newest verified report (null when that report names none); null when no reports were fetched at all. */
export async function currentRecipients(fleet: Fleet): Promise<CurrentRecipients | null> {
  const nodes = await reportedNodes(fleet);
  if (nodes.length === 0) return null;
  const reports = await lastReports(fleet, nodes);
  return new Map(nodes.map((n) => [n, trusted(reports.get(n))?.recipient ?? null]));
}

/** The secrets in `fleet`'s checkout encrypted to `node` ("FILE: NAME"): their values must change when it leaves, since old commits hold blocks it can open. */
export async function secretsOf(dir: string, node: string): Promise<string[]> {
  const { byFile } = await allSecrets(workingTree(dir));
  return [...byFile.values()].flatMap((entries) => encryptedTo(node, entries).map((s) => `${s.file}: ${s.name}`));
}
