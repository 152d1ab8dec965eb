/**
 * `mesh-cli init DIR`: a new fleet repo from examples/fleet-repo, as a git repository with a
 * first commit: mesh.yaml, nodes/, roles/, a README, and a ready CI workflow
 * (.github/workflows/mesh.yml: validate and plan on pull requests, the rollout after merge).
 * With `--example` it also takes the example fleet's declarations (groups, roles, variables).
 *
 * Signing costs a new user nothing: the checkout is set up (local config only) to sign every
 * commit with the operator's SSH key, and mesh.yaml trusts that key (`trust: signed`), so hosts
 * apply only what this operator signed. The key is `--signing-key FILE`, else ~/.ssh/id_ed25519,
 * else a new one created there. The checkout also gets an allowed_signers file from mesh.yaml,
 * so that `git log --show-signature` and `git verify-commit` work in it.
 *
 * `--remote URL` adds the fleet repo as origin. A user and password in the URL (the operator
 * credential `mesh-cli serve` made) never go into .git/config: origin gets the URL without them,
 * and the credential goes to a git credential store file, .git/mesh-credentials (mode 0600), that
 * the checkout's `credential.helper` reads. A checkout whose origin URL holds the credential
 * (made before this) keeps working as it is.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MeshError } from '../../core/errors.js';
import { commitPaths } from '../fleet.js';
import { git } from '../git.js';
import { operatorKey, type SigningKey } from '../signing-key.js';

export interface InitOptions {
  name?: string;
  /** The operator's private key; its public half is FILE.pub. Default: ~/.ssh/id_ed25519 (created when missing). */
  signingKey?: string;
  /** How the key is named in mesh.yaml `signers` (default: git's user.email, else user.name, else "operator"). */
  signer?: string;
  /** Also copy the example fleet's declarations (groups web and db, two roles, variables at each level). */
  example?: boolean;
  /** The fleet repo's URL, added as origin; a credential in it goes to a credential store file, not into .git/config. */
  remote?: string;
}

/** Create the fleet repo in `dir` (which must be missing or empty); returns the first commit and the signing key. */
export async function initFleet(dir: string, opts: InitOptions = {}): Promise<{ commit: string; key: SigningKey }> {
  const target = resolve(dir);
  if (existsSync(target) && readdirSync(target).length > 0) throw new MeshError('E_NOT_EMPTY', `${target} is not empty: pick a new folder for the fleet repo`);
  if (opts.remote !== undefined) checkRemote(opts.remote, target);
  const remote = opts.remote === undefined ? null : splitCredential(opts.remote);
  const key = await operatorKey(opts.signingKey);
  mkdirSync(target, { recursive: true });
  const source = exampleDir();
  // Without --example a new fleet declares nothing: a node put in a group gets only what its operator wrote.
  const scaffold = (path: string) => opts.example || !/^(nodes|roles)\/.*\.ya?ml$/.test(relative(source, path));
  cpSync(source, target, { recursive: true, filter: scaffold });
  await git(target, ['init', '--quiet', '--initial-branch=main']);
  const signer = opts.signer ?? (await identity(target));
  const meshYaml = join(target, 'mesh.yaml');
  const text = readFileSync(meshYaml, 'utf8').replace(/^name: .*$/m, `name: ${opts.name ?? basename(target)}`);
  writeFileSync(meshYaml, withSigner(text, signer, key.publicKey));
  const allowed = join(target, '.git', 'allowed_signers');
  writeFileSync(allowed, `${principal(signer)} namespaces="git" ${key.publicKey.split(/\s+/).slice(0, 2).join(' ')}\n`);
  // The pre-push trust check travels with the repo; a clone turns it on with the same one setting.
  for (const [k, v] of [['core.hooksPath', '.githooks'], ['gpg.format', 'ssh'], ['user.signingkey', key.privateKeyFile], ['commit.gpgsign', 'true'], ['gpg.ssh.allowedSignersFile', allowed]]) {
    await git(target, ['config', '--local', k!, v!]);
  }
  if (remote) await addOrigin(target, remote);
  return { commit: await commitPaths(target, ['.'], `mesh: new fleet ${opts.name ?? basename(target)}`), key };
}

/** `url` without its user and password, and those as a line of git's credential store (null when none; an scp-like ssh remote has none). */
function splitCredential(url: string): { plain: string; credential: string | null } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { plain: url, credential: null };
  }
  if (!u.username && !u.password) return { plain: url, credential: null };
  const credential = `${u.protocol}//${u.username}:${u.password}@${u.host}\n`; // both stay percent-encoded, as the store wants them
  u.username = '';
  u.password = '';
  return { plain: u.toString(), credential };
}

/** origin = the URL without a credential; the credential, when given, in .git/mesh-credentials (0600), which git's store helper reads. */
async function addOrigin(dir: string, remote: { plain: string; credential: string | null }): Promise<void> {
  await git(dir, ['remote', 'add', 'origin', remote.plain]);
  if (remote.credential === null) return;
  const file = join(dir, '.git', 'mesh-credentials');
  writeFileSync(file, remote.credential, { mode: 0o600, flag: 'wx' });
  await git(dir, ['config', '--local', 'credential.helper', `store --file '${file.replace(/'/g, `'\\''`)}'`]);
}

/**
 * Refuse a remote git could not push to: neither a URL (https://…, ssh://…, file://…), nor an
 * scp-like address (git@host:path), nor a folder that exists (a bare repository on this machine;
 * a relative path is git's, from the new checkout `target`).
 */
function checkRemote(remote: string, target: string): void {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(remote) || /^[^/:]+:/.test(remote) || existsSync(resolve(target, remote))) return;
  throw new MeshError('E_BAD_REMOTE', `--remote ${remote} is neither a URL (https://HOST/PATH), an ssh address (git@HOST:PATH) nor a folder that exists (from ${target}): give the address of the fleet repository to push to; nothing was created`);
}

/** mesh.yaml with `trust: signed` and the operator's key as its one signer (the example's comments kept). */
function withSigner(text: string, name: string, publicKey: string): string {
  const key = publicKey.split(/\s+/).slice(0, 2).join(' ');
  const signers = `signers:\n  - name: ${JSON.stringify(name)}\n    key: ${key}\n`;
  return text.replace(/^trust: .*$/m, 'trust: signed').replace(/^signers:.*\n(?:[ -].*\n)*/m, signers);
}

/** An allowed_signers principal: no spaces, quotes or commas. */
function principal(name: string): string {
  return name.replace(/[\s",*?!]/g, '_') || 'operator';
}

async function identity(dir: string): Promise<string> {
  for (const k of ['user.email', 'user.name']) {
    const v = (await git(dir, ['config', '--get', k]).catch(() => '')).trim();
    if (v) return v;
  }
  return 'operator';
}

/** examples/fleet-repo, found from wherever this code runs (source tree or dist/ bundle). */
function exampleDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'examples/fleet-repo');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new MeshError('E_INSTALL', 'cannot find examples/fleet-repo next to mesh-cli: the installation is incomplete');
}
