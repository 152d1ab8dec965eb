/**
 * The report branch, as both programs read and write it: one branch per node,
 * `refs/heads/reports/<node>`, each commit holding the report (`status.json`) and its OpenSSH
 * signature (`status.json.sig`), signed itself with the node key. A report that says nothing
 * new is committed as a heartbeat, marked by a trailer in its message, and replaces the
 * heartbeat before it. The signatures' namespaces live with the payloads in schema/signing.ts.
 */
export { REPORT_NAMESPACE, VOUCH_NAMESPACE, vouchPayload } from '../../schema/signing.js';

/** Where every report branch lives on the server. */
export const REPORT_REFS = 'refs/heads/reports/';
/** The report file in each report commit. */
export const STATUS_FILE = 'status.json';
/** Its OpenSSH signature (namespace REPORT_NAMESPACE) beside it. */
export const SIGNATURE_FILE = 'status.json.sig';
/** The trailer that marks a heartbeat commit. */
export const HEARTBEAT_TRAILER = 'Mesh-Heartbeat: yes';

/** The full ref of `node`'s report branch. */
export function reportRef(node: string): string {
  return `${REPORT_REFS}${node}`;
}

/** `message` with the heartbeat trailer. */
export function heartbeatMessage(message: string): string {
  return `${message.trimEnd()}\n\n${HEARTBEAT_TRAILER}\n`;
}

/** Whether a report commit's message marks it as a heartbeat. */
export function isHeartbeatMessage(message: string): boolean {
  return message.split('\n').includes(HEARTBEAT_TRAILER);
}
