/**
 * A simulated machine's own account database, written from scratch (never the host's): root, the
 * users group, and `ops` (uid 1001), a user that was there before mesh; and a login.defs whose id
 * ranges useradd and groupadd use inside the root.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function writeAccounts(root: string): void {
  const etc = (name: string, text: string, mode = 0o644) => writeFileSync(join(root, 'etc', name), text, { mode });
  etc('passwd', 'root:x:0:0:root:/root:/bin/sh\nops:x:1001:1001::/home/ops:/bin/sh\n');
  etc('group', 'root:x:0:\nusers:x:100:\nops:x:1001:\n');
  etc('shadow', 'root:*:19000:0:99999:7:::\nops:!:19000:0:99999:7:::\n', 0o640);
  etc('gshadow', 'root:*::\nusers:*::\nops:!::\n', 0o640);
  etc('login.defs', 'UID_MIN 2000\nUID_MAX 60000\nGID_MIN 2000\nGID_MAX 60000\nSYS_UID_MIN 100\nSYS_UID_MAX 999\nSYS_GID_MIN 100\nSYS_GID_MAX 999\nUSERGROUPS_ENAB yes\n');
}
