/**
 * Where a fleet declares a systemd unit of its own: /etc/systemd/system/NAME, "hello" being
 * hello.service. The host's service needs that file when it is declared and reads it again when it
 * changed (agent/resources/service.ts); `mesh-cli plan` says so (mesh-cli/declaration-diff.ts).
 */
const UNIT_SUFFIX = /\.(service|socket|device|mount|automount|swap|target|path|timer|slice|scope)$/;

/** The unit file of the service `name` in /etc/systemd/system. */
export function unitFile(name: string): string {
  return `/etc/systemd/system/${UNIT_SUFFIX.test(name) ? name : `${name}.service`}`;
}

/** The folder of that unit file's drop-ins (NAME.service.d/), ending in /. */
export function dropInDir(name: string): string {
  return `${unitFile(name)}.d/`;
}
