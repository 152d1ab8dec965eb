/**
 * The pre-receive hook of `mesh-cli serve`, installed for every request through git config
 * (`core.hooksPath`), never into the repositories themselves. git runs it with the request's
 * environment: REMOTE_USER (who authenticated) and MESH_ROLE (operator or node). A node may
 * push only its own report branch, refs/heads/reports/<node> (non-fast-forward allowed, since
 * a heartbeat replaces the heartbeat before it), and delete nothing; an operator may push
 * anything except deleting the fleet's main branch (HEAD), which every host polls.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const PRE_RECEIVE = `#!/bin/sh
# Written by mesh-cli serve at every start: who may push what (docs/security.md).
main=$(git symbolic-ref -q HEAD)
status=0
while read -r old new ref; do
  case "$new" in *[!0]*) deleting=no ;; *) deleting=yes ;; esac
  case "$MESH_ROLE" in
    operator)
      if [ "$deleting" = yes ] && [ "$ref" = "$main" ]; then
        echo "mesh: $ref is the fleet's main branch; it cannot be deleted" >&2
        status=1
      fi ;;
    node)
      if [ "$ref" != "refs/heads/reports/$REMOTE_USER" ]; then
        echo "mesh: node $REMOTE_USER may push only refs/heads/reports/$REMOTE_USER, not $ref" >&2
        status=1
      elif [ "$deleting" = yes ]; then
        echo "mesh: node $REMOTE_USER may not delete its report branch" >&2
        status=1
      fi ;;
    *)
      echo "mesh: push refused: the request has no role" >&2
      status=1 ;;
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

/** Where the hooks of the data folder `data` live. */
export function hooksDir(data: string): string {
  return join(data, '.mesh-hooks');
}
