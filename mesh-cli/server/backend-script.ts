/**
 * `git http-backend` as a web server other than `mesh-cli serve` should run it for a fleet: a
 * small shell CGI program (`mesh-cli hook http-backend-script` prints it) that gives git the
 * same per-user configuration serve gives it (mesh-auth.ts nodeRefs, backend.ts), then runs the
 * real backend. A user who is not an operator sees and may update main and their own report
 * branch only: the other nodes' report branches are not advertised to them, and a push's
 * connectivity check walks main and that branch instead of every branch of the fleet (at 10,000
 * report branches, ~2.3 s of CPU per push without it, ~0.05 s with it; docs/servers.md).
 *
 * A shell script, not Node: it runs once per HTTP request, and a host's poll is one request.
 * Operators are the names in the file `git config mesh.operators` names, the file the hooks read
 * (`mesh-cli hook`), resolved against the repository as they resolve it.
 */
import { REPORT_REFS } from '../../core/report/branch.js';
import { nodeRefs } from './mesh-auth.js';

/** The CGI program, running the backend at `backend` (git's exec path + `/git-http-backend`). */
export function httpBackendScript(backend: string): string {
  // nodeRefs for a node whose name is the shell's $user, so that the script hides exactly what serve hides.
  const hidden = nodeRefs('NODE').map(([key, value]) => (value.startsWith('!')
    ? `  [ -z "$user" ] || add ${key} "${value.replace('NODE', '$user')}"` // no name: every report branch stays hidden
    : `  add ${key} "${value}"`));
  return `#!/bin/sh
# git http-backend for a mesh fleet repository, as a CGI program (written by
# \`mesh-cli hook http-backend-script\`; docs/servers.md). A user who is not an operator sees and
# may update main and their own report branch (${REPORT_REFS}USER) only, as under
# \`mesh-cli serve\`. Operators are the names in the file \`git config mesh.operators\` names.
user=\${REMOTE_USER:-}
# The repository: PATH_INFO less the smart protocol's endpoints (a dumb-protocol path, which would
# pass by the hidden refs, names no repository and is refused below).
path=\${PATH_INFO#/}
for end in /info/refs /git-upload-pack /git-receive-pack /HEAD; do path=\${path%"$end"}; done
repo="\${GIT_PROJECT_ROOT%/}/$path"
operators=$(git config --file "$repo/config" --get mesh.operators 2>/dev/null) || operators=
case $operators in /*) ;; ?*) operators="$repo/$operators" ;; esac
if [ -z "$operators" ] || [ ! -r "$operators" ]; then
  echo "mesh: $repo has no readable operators file (git config mesh.operators): refusing to serve it (docs/servers.md)" >&2
  printf 'Status: 500 Internal Server Error\\r\\nContent-Type: text/plain\\r\\n\\r\\nmesh: this repository has no readable operators file (git config mesh.operators)\\n'
  exit 0
fi
n=0
add() { export "GIT_CONFIG_KEY_$n=$1" "GIT_CONFIG_VALUE_$n=$2"; n=$((n + 1)); }
# receive-pack reads the refs of the repository it quarantines a push in as "alternate" refs:
# main alone, or every branch of the fleet is walked at every push.
add core.alternateRefsPrefixes refs/heads/main
# An operator's name is what starts a line, up to a colon or a space (as \`mesh-cli hook\` reads the file).
if [ -z "$user" ] || ! awk -v u="$user" '{ sub(/[:[:space:]].*/, "") } $0 != "" && $0 !~ /^#/ && $0 == u { f = 1 } END { exit !f }' "$operators"; then
${hidden.join('\n')}
fi
export GIT_CONFIG_COUNT=$n
exec ${backend}
`;
}
