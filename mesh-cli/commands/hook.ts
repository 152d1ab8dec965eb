/**
 * `mesh-cli hook pre-receive`, `hook update REF OLD NEW` and `hook post-receive`: mesh's access
 * rules (core/access/rules.ts, the ones `mesh-cli serve` applies in-process) as standard git
 * hooks, for a fleet repository served by another git server (docs/servers.md). git runs them
 * inside the bare repository: GIT_DIR, and during pre-receive and update the push's quarantine
 * (GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES), which every git started here inherits.
 *
 * Who pushes is the first set of REMOTE_USER (Apache and any CGI server), GL_USERNAME (GitLab),
 * GITEA_PUSHER_NAME (Gitea, Forgejo) and GL_USER (gitolite). An operator is a name in the file
 * `git config mesh.operators` names (one per line, `name` or `name:…`: a plain list, an htpasswd
 * file and serve's operators file all do); a node is one whose node.yaml on the newest trusted
 * main holds a token (a revoked node holds none). What the repository trusts is kept in
 * GIT_DIR/mesh-trust.json, the enrolments in GIT_DIR/mesh-enrolments (or `mesh.enrolments`).
 *
 * `http-backend-script` prints the CGI program a web server runs in place of `git http-backend`
 * (server/backend-script.ts): other nodes' report branches hidden from each node, as serve does.
 *
 * post-receive writes the password file `git config mesh.htpasswd` names: every node's
 * credential hash (SHA-256-crypt) from the newest trusted main, so that revoke and re-enrolment
 * take effect at the web server in front of the repository.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { enrolmentFolder } from '../../core/access/enrolments.js';
import { pusherOf, refusedNodePush, refusedRefs, type Pusher, type PushReader, type RefUpdate } from '../../core/access/rules.js';
import { MeshError } from '../../core/errors.js';
import { reportRef, STATUS_FILE } from '../../core/report/branch.js';
import { loadYaml } from '../../core/load.js';
import { NODE_NAME, NodeIdentity } from '../../schema/fleet.js';
import { catFileBatch, git, gitExecPath } from '../git.js';
import { httpBackendScript } from '../server/backend-script.js';
import { nodePlaces, readIdentity } from '../server/mesh-auth.js';
import { TrustedMain } from '../server/trusted-main.js';

/** The variables git servers name the pusher in, in the order they are asked. */
export const USER_VARIABLES = ['REMOTE_USER', 'GL_USERNAME', 'GITEA_PUSHER_NAME', 'GL_USER'];

/** The bare repository a hook runs in, as the hook reads it. */
interface HookRepo {
  dir: string;
  trust: TrustedMain;
}

function openRepo(env: NodeJS.ProcessEnv): HookRepo {
  const dir = resolve(env.GIT_DIR ?? '.');
  const log = (_repo: string, tip: string, code: string, message: string) =>
    process.stderr.write(`mesh: main's tip ${tip} is not trusted (${code}: ${message}); node identities are read from the last trusted main\n`);
  return { dir, trust: new TrustedMain(dirname(dir), log, () => new Date(), () => join(dir, 'mesh-trust.json')) };
}

const run = (repo: HookRepo, args: string[]) => git(repo.dir, args);
const config = async (repo: HookRepo, key: string) => (await run(repo, ['config', '--get', key]).catch(() => '')).trim() || null;

/** The node identities on the newest trusted main, or null when no commit of main is trusted. */
async function trustedNodes(repo: HookRepo): Promise<{ trusted: string; places: Map<string, string | null> } | null> {
  const tip = (await run(repo, ['rev-parse', '--verify', '--quiet', 'HEAD^{commit}']).catch(() => '')).trim();
  if (!tip) return null;
  const trusted = await repo.trust.trusted(basename(repo.dir), tip);
  return trusted === null ? null : { trusted, places: await nodePlaces(repo.dir, trusted) };
}

async function identityOf(repo: HookRepo, node: string): Promise<NodeIdentity | null> {
  const nodes = NODE_NAME.test(node) ? await trustedNodes(repo) : null;
  const file = nodes?.places.get(node);
  return nodes && file ? readIdentity(repo.dir, nodes.trusted, node, file) : null;
}

async function operatorNames(repo: HookRepo): Promise<Set<string>> {
  const file = await config(repo, 'mesh.operators');
  if (file === null) return new Set();
  const text = readFileSync(resolve(repo.dir, file), 'utf8');
  return new Set(text.split('\n').map((l) => /^([^#:\s][^:\s]*)/.exec(l)?.[1]).filter((n): n is string => n !== undefined));
}

/** Who pushes: the user the server names, as operator, node or unknown. */
export async function hookPusher(repo: HookRepo, env: NodeJS.ProcessEnv): Promise<Pusher> {
  const user = USER_VARIABLES.map((k) => env[k]).find((v) => v !== undefined && v !== '') ?? '';
  if (user !== '' && (await operatorNames(repo)).has(user)) return pusherOf(user, true, null);
  const identity = user === '' ? null : await identityOf(repo, user);
  return pusherOf(user, false, identity?.token ? identity.generation : null);
}

/** A node's pushed commits read with git (in the quarantine): new means not reachable from main or its own branch. */
function gitReader(repo: HookRepo, node: string): PushReader {
  return {
    newCommits: async (tip) => (await run(repo, ['rev-list', tip, '--not', '--ignore-missing', 'HEAD', reportRef(node)])).split('\n').filter(Boolean),
    files: async (commit) => (await run(repo, ['ls-tree', '-r', '-l', '-z', commit])).split('\0').filter(Boolean).map((entry) => {
      const tab = entry.indexOf('\t');
      const size = entry.slice(0, tab).trim().split(/\s+/)[3];
      return { path: entry.slice(tab + 1), size: size === '-' ? 0 : Number(size) };
    }),
    statusJson: (commit) => run(repo, ['cat-file', 'blob', `${commit}:${STATUS_FILE}`]).catch(() => null),
  };
}

/** Every refusal of `updates` by the pusher: the ref rules, then a node's commits. */
async function refusals(repo: HookRepo, env: NodeJS.ProcessEnv, updates: RefUpdate[]): Promise<string[]> {
  const who = await hookPusher(repo, env);
  const main = (await run(repo, ['symbolic-ref', '-q', 'HEAD']).catch(() => '')).trim() || null;
  const refused = refusedRefs(who, updates, main);
  if (refused.length > 0 || who.role !== 'node') return refused;
  const records = enrolmentFolder(resolve(repo.dir, (await config(repo, 'mesh.enrolments')) ?? 'mesh-enrolments'));
  for (const u of updates) {
    const why = await refusedNodePush(who, u.new, gitReader(repo, who.user), records);
    if (why) return [why];
  }
  return [];
}

/** git's "old new ref" lines. */
function parseUpdates(text: string): RefUpdate[] {
  return text.split('\n').filter(Boolean).map((line) => {
    const [old, next, ref] = line.split(' ');
    if (!old || !next || !ref) throw new MeshError('E_HOOK_INPUT', `not a ref update line: ${JSON.stringify(line)}; git gives a hook "old new ref" lines`);
    return { old, new: next, ref };
  });
}

/** Write the password file: one `node:$5$…` line per node with a token and a credential on the trusted main (one cat-file for all). */
async function writePasswords(repo: HookRepo, file: string): Promise<number> {
  const nodes = await trustedNodes(repo);
  const places = [...(nodes?.places ?? [])].filter((e): e is [string, string] => e[1] !== null);
  const batch = catFileBatch(repo.dir);
  const lines: string[] = [];
  try {
    const blobs = await batch.read(places.map(([, place]) => `${nodes!.trusted}:${place}`));
    places.forEach(([node, place], i) => {
      const loaded = blobs[i]?.type === 'blob' ? loadYaml(blobs[i]!.data.toString('utf8'), place, NodeIdentity) : null;
      const identity = loaded?.ok && loaded.value.node === node ? loaded.value : null;
      if (identity?.token && identity.credential?.crypt) lines.push(`${node}:${identity.credential.crypt}\n`);
    });
  } finally {
    await batch.close();
  }
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, lines.join(''), { mode: 0o640 });
  renameSync(tmp, file);
  return lines.length;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function refuse(lines: string[]): void {
  for (const line of lines) process.stderr.write(line + '\n');
  if (lines.length > 0) process.exitCode = 1;
}

export function hookCommand(program: Command, env: NodeJS.ProcessEnv): void {
  const hook = program.command('hook').description("mesh's access rules as git hooks, for a fleet repository served by another git server (docs/servers.md)");
  hook.command('pre-receive').description('refuse what the pusher may not push; git gives "old new ref" lines on stdin')
    .action(async () => refuse(await refusals(openRepo(env), env, parseUpdates(await readStdin()))));
  hook.command('update').description('the same for one ref, as git runs an update hook').argument('<ref>').argument('<old>').argument('<new>')
    .action(async (ref: string, old: string, next: string) => refuse(await refusals(openRepo(env), env, [{ old, new: next, ref }])));
  hook.command('http-backend-script').description("print a CGI program that runs git http-backend hiding other nodes' report branches from each node, as serve does (install it where your web server runs git http-backend)")
    .action(async () => void process.stdout.write(httpBackendScript(`${await gitExecPath()}/git-http-backend`)));
  hook.command('post-receive').description("when main moved (or run by hand, stdin empty): write the password file git config mesh.htpasswd names from the newest trusted main")
    .action(async () => {
      const repo = openRepo(env);
      const updates = parseUpdates(await readStdin());
      const main = (await run(repo, ['symbolic-ref', '-q', 'HEAD']).catch(() => '')).trim();
      if (updates.length > 0 && !updates.some((u) => u.ref === main)) return; // a report push: nothing to write
      const file = await config(repo, 'mesh.htpasswd');
      if (file === null) throw new MeshError('E_HOOK_CONFIG', `no password file to write: set one with 'git --git-dir ${repo.dir} config mesh.htpasswd FILE' (docs/servers.md)`);
      const count = await writePasswords(repo, resolve(repo.dir, file));
      process.stderr.write(`mesh: ${file} names ${count} node credential(s) from the trusted main\n`);
    });
}
