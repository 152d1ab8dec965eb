/**
 * What report signatures are made over, without the report schema: the namespaces of the two
 * SSH signatures and the bytes a token key signs to vouch for a node key. Kept apart from
 * schema/report.ts (zod) so that the threads that verify reports for `mesh-cli status`
 * (mesh-cli/verify-worker.ts) load only the signature code.
 */
export const REPORT_NAMESPACE = 'mesh-report';
export const VOUCH_NAMESPACE = 'mesh-enrol';

/** The exact bytes the token key signs to vouch for a node key. */
export function vouchPayload(node: string, generation: number, nodeKey: string): string {
  return `mesh-enrol v1\nnode ${node}\ngeneration ${generation}\nkey ${nodeKey}\n`;
}

/**
 * The key blob of an OpenSSH ed25519 public key line ("ssh-ed25519 AAAA... [comment]"): its
 * base64 must decode, exactly, to the type's name and 32 bytes of key. Null for anything else
 * (a garbled or cut key passes a mere pattern, and a fleet whose only signer cannot be read
 * would trust no later commit).
 */
export function ed25519Blob(line: string): Buffer | null {
  const [type, b64] = typeof line === 'string' ? line.trim().split(/\s+/, 2) : [];
  if (type !== 'ssh-ed25519' || b64 === undefined) return null;
  const blob = Buffer.from(b64, 'base64');
  if (blob.length !== 51 || blob.toString('base64') !== b64 || blob.readUInt32BE(0) !== 11 || blob.toString('latin1', 4, 15) !== type || blob.readUInt32BE(15) !== 32) return null;
  return blob;
}
