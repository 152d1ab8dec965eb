/**
 * The pre-receive hook of `mesh-cli serve`, installed for every request through git config
 * (`core.hooksPath`), never into the repositories themselves. git runs it with the request's
 * environment: REMOTE_USER (who authenticated) and MESH_ROLE (operator or node). Which refs a
 * push may update was decided before git started, in-process (push-rules.ts); what a node's new
 * commits hold is decided in-process too, by the same core/access/rules.ts that `mesh-cli hook`
 * runs on other git servers: the hook hands the server its push's quarantine and updates over
 * 127.0.0.1 (push-checks.ts, with the ticket in git config mesh.check) and says what it answers.
 * It is bash, for /dev/tcp, and starts one git (config) and no Node: a node pushes at every pass.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_REPORT_FILE } from '../../core/access/rules.js';

export { MAX_REPORT_FILE };

const PRE_RECEIVE = `#!/usr/bin/env bash
# Written by mesh-cli serve at every start (docs/security.md): which refs a push may update, serve
# decided before git started; what a node's push holds, it decides now, asked over 127.0.0.1.
case "$MESH_ROLE" in
  operator) exit 0 ;;
  node) ;;
  *) echo "mesh: push refused: the request has no role" >&2; exit 1 ;;
esac
read -r port ticket <<< "$(git config mesh.check)"
if [ -z "$ticket" ] || ! exec 3<>"/dev/tcp/127.0.0.1/$port"; then
  echo "mesh: push refused: the server's check of this push cannot be reached" >&2
  exit 1
fi
{ printf '%s\n' "$ticket" "$GIT_OBJECT_DIRECTORY" "$GIT_ALTERNATE_OBJECT_DIRECTORIES" "$GIT_QUARANTINE_PATH"; cat; printf '\n'; } >&3
status=1
while IFS= read -r line <&3; do
  case "$line" in
    ok) status=0 ;;
    refused) status=1 ;;
    *) printf '%s\n' "$line" >&2 ;;
  esac
done
exit $status
`;

/** Write the hooks into `dir` (DATA/.mesh-hooks), replacing what an earlier version wrote; returns the folder. */
export function installHooks(dir: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'pre-receive');
  writeFileSync(file, PRE_RECEIVE, { mode: 0o755 });
  chmodSync(file, 0o755);
  return dir;
}

/** Where the server records the enrolments of repository `repo` in the data folder `data`. */
export function enrolmentsDir(data: string, repo: string): string {
  return join(data, '.mesh-enrolments', repo.replace(/\.git$/, ''));
}

/** Where the hooks of the data folder `data` live. */
export function hooksDir(data: string): string {
  return join(data, '.mesh-hooks');
}
