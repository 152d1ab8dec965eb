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
