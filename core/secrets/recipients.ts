/**
 * Who a secret is for, from recipient lists alone (nothing is decrypted): every node at or
 * below the level of its file, by the recipient its newest verified report names, and the
 * fleet's operators. `validate`, `plan` and `secret rekey` compare an entry's list with that.
 */
import type { NodePlace } from '../fleet/layout.js';
import type { SecretRecipient } from '../../schema/secrets.js';
import type { PlacedSecret } from './levels.js';

/** Each node's current recipient (null: it has reported none yet; a node not in the map: its reports are not known here). */
export type CurrentRecipients = Map<string, string | null>;

/** The nodes at or below the folder `level` (nodes/, a group's folder, or a node's own), in name order. */
export function nodesAtOrBelow(level: string, nodes: Map<string, NodePlace>): string[] {
  return [...nodes.values()].filter((p) => p.dir === level || p.dir.startsWith(`${level}/`) || level === 'nodes').map((p) => p.node).sort();
}

/** The recipients a secret at `level` should be encrypted to, and the nodes left out because they have reported no recipient. */
export function wantedRecipients(level: string, nodes: Map<string, NodePlace>, current: CurrentRecipients, operators: { name: string; recipient: string }[]): { recipients: SecretRecipient[]; missing: string[] } {
  const recipients: SecretRecipient[] = [];
  const missing: string[] = [];
  for (const node of nodesAtOrBelow(level, nodes)) {
    const r = current.get(node);
    if (r) recipients.push({ node, recipient: r });
    else missing.push(node);
  }
  for (const o of operators) recipients.push({ operator: o.name, recipient: o.recipient });
  return { recipients, missing };
}

/** Whether two recipient lists name the same recipients for the same nodes and operators, in any order. */
export function sameRecipients(a: SecretRecipient[], b: SecretRecipient[]): boolean {
  const key = (r: SecretRecipient) => ('node' in r ? `node:${r.node}` : `operator:${r.operator}`) + `=${r.recipient}`;
  const ka = new Set(a.map(key));
  const kb = new Set(b.map(key));
  return ka.size === kb.size && [...ka].every((k) => kb.has(k));
}

/** Why `node` cannot read `secret`, from its list alone; null when it can (or, without its recipient known, when it is at least listed). */
export function cannotRead(secret: PlacedSecret, node: string, current: CurrentRecipients): string | null {
  const listed = secret.entry.recipients.filter((r) => 'node' in r && r.node === node);
  const now = current.get(node);
  if ((now === undefined || now === null) && listed.length > 0) return null;
  if (listed.some((r) => r.recipient === now)) return null;
  return listed.length > 0
    ? `secret ${secret.name} is not encrypted to ${node}'s current recipient (${node} re-enrolled since: its newest report names ${now}); ${remedy(secret)}`
    : `secret ${secret.name} is not encrypted to ${node} (it is not in the secret's recipients); ${remedy(secret)}`;
}

/**
 * What makes `secret` readable by a node that cannot open it: `secret rekey` when an operator is
 * among its recipients (rekey opens it with an operator's identity); else nobody can open it to
 * re-encrypt it, and it must be set again at its level.
 */
export function remedy(secret: PlacedSecret): string {
  if (secret.entry.recipients.some((r) => 'operator' in r)) return 'run mesh-cli secret rekey';
  const level = secret.level === 'nodes' ? '' : ` --level ${secret.level.slice('nodes/'.length)}`;
  return `no operator is among its recipients, so rekey cannot open it: set it again with mesh-cli secret set ${secret.name}${level}`;
}

/** The secrets (from `entries`, each file's) whose list names `node`: what must change when the node leaves (retire, revoke). */
export function encryptedTo(node: string, entries: PlacedSecret[]): PlacedSecret[] {
  return entries.filter((s) => s.entry.recipients.some((r) => 'node' in r && r.node === node));
}
