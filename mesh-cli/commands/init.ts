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
}

/** Create the fleet repo in `dir` (which must be missing or empty); returns the first commit and the signing key. */
export async function initFleet(dir: string, opts: InitOptions = {}): Promise<{ commit: string; key: SigningKey }> {
  const target = resolve(dir);
  if (existsSync(target) && readdirSync(target).length > 0) throw new MeshError('E_NOT_EMPTY', `${target} is not empty: pick a new folder for the fleet repo`);
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
  for (const [k, v] of [['gpg.format', 'ssh'], ['user.signingkey', key.privateKeyFile], ['commit.gpgsign', 'true'], ['gpg.ssh.allowedSignersFile', allowed]]) {
    await git(target, ['config', '--local', k!, v!]);
  }
  return { commit: await commitPaths(target, ['.'], `mesh: new fleet ${opts.name ?? basename(target)}`), key };
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
