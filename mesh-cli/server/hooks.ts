/**
 * The pre-receive hook of `mesh-cli serve`, installed for every request through git config
 * (`core.hooksPath`), never into the repositories themselves. git runs it with the request's
 * environment: REMOTE_USER (who authenticated) and MESH_ROLE (operator or node). Which refs a
 * push may update was decided before git started, in-process, by core/access/rules.ts
 * (push-rules.ts); this hook reads what a node's push holds, inside git's quarantine, as
 * refusedNodePush in core/access/rules.ts does for `mesh-cli hook` on other git servers (same
 * checks, same messages; test/hook.test.ts and test/server-trust.test.ts hold them to it). A
 * host's usual report push that passes these checks never reaches git: report-receive.ts takes
 * it; everything else, every refusal included, comes here.
 *
 * No file of a node's new report commits may be larger than MAX_REPORT_FILE, and an enrolment
 * report uses its token. The first enrolment of a (node, generation) is recorded in the data
 * folder (`mkdir`, so two at once cannot both win), where the token's credential cannot undo it;
 * a second one is refused as "already used", whatever the report branch holds. The generation
 * and the record's folder come from the server (git config mesh.generation, mesh.enrolments),
 * which read them from the trusted main. A shell script, not mesh-cli: a node pushes at every
 * pass, and a Node start per push would cost more than the checks.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_REPORT_FILE } from '../../core/access/rules.js';

export { MAX_REPORT_FILE };

const PRE_RECEIVE = `#!/bin/sh
# Written by mesh-cli serve at every start: what a node's push may hold (docs/security.md);
# which refs a push may update, serve decided before git started.
max_file=${MAX_REPORT_FILE}
status=0

# The new report commits of a node's push: none holds a file over max_file; an enrolment uses the
# token. Few processes per commit (rev-list, ls-tree, cat-file): a node pushes at every pass.
# "New" means not reachable from a ref this node can see (main, its own branch): against --all,
# git 2.39's rev-list takes ~2 CPU-seconds at 10,000 report branches (docs/scale.md, session 10).
node_push() {
  enrolment=no
  for c in $(git rev-list "$1" --not --exclude-hidden=receive --all); do
    big=
    while read -r _mode _type _oid size path; do
      if [ "$size" != - ] && [ "$size" -gt "$max_file" ]; then big="$path ($size bytes)"; break; fi
    done <<EOF
$(git ls-tree -r -l "$c")
EOF
    if [ -n "$big" ]; then
      echo "mesh: report $c of $REMOTE_USER holds $big, over the limit of $max_file bytes per file; the push is refused" >&2
      return 1
    fi
    case "$(git cat-file blob "$c:status.json" 2>/dev/null)" in
      *'
  "kind": "enrolment"'*) enrolment=yes ;;
    esac
  done
  [ "$enrolment" = yes ] || return 0
  generation=$(git config mesh.generation)
  records=$(git config mesh.enrolments)
  if [ -z "$generation" ] || [ -z "$records" ]; then
    echo "mesh: enrolment of $REMOTE_USER refused: the server did not say which generation its credential is" >&2
    return 1
  fi
  mkdir -p "$records"
  if ! mkdir "$records/$REMOTE_USER.$generation" 2>/dev/null; then
    echo "mesh: the token of $REMOTE_USER generation $generation was already used: it enrolled a machine at $(cat "$records/$REMOTE_USER.$generation/at" 2>/dev/null || echo 'an earlier time'). A token enrols one machine once; issue a new one with 'mesh-cli token issue $REMOTE_USER'" >&2
    return 1
  fi
  date -u +%Y-%m-%dT%H:%M:%SZ > "$records/$REMOTE_USER.$generation/at"
}

while read -r old new ref; do
  case "$MESH_ROLE" in
    operator) ;;
    node) node_push "$new" || status=1 ;;
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

/** Where the server records the enrolments of repository `repo` in the data folder `data`. */
export function enrolmentsDir(data: string, repo: string): string {
  return join(data, '.mesh-enrolments', repo.replace(/\.git$/, ''));
}

/** Where the hooks of the data folder `data` live. */
export function hooksDir(data: string): string {
  return join(data, '.mesh-hooks');
}
