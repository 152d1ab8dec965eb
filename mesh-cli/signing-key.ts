/**
 * The operator's SSH signing key for `mesh-cli init`: a given private key file, else the usual
 * ~/.ssh/id_ed25519, else a new one created there with ssh-keygen. Only ed25519 keys are
 * accepted, because hosts verify commit signatures with node:crypto's ed25519.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { MeshError, messageOf } from '../core/errors.js';
import { parseSshPublicKey } from '../core/sign/sshsig.js';

export interface SigningKey {
  privateKeyFile: string;
  /** "ssh-ed25519 AAAA... [comment]" */
  publicKey: string;
  /** True when init had to create the key. */
  created: boolean;
}

/** The key at `file` (its public half beside it, or derived with ssh-keygen), or the default one, created when missing. */
export async function operatorKey(file?: string): Promise<SigningKey> {
  const path = resolve(file ?? join(homedir(), '.ssh', 'id_ed25519'));
  let created = false;
  if (!existsSync(path)) {
    if (file !== undefined) throw new MeshError('E_SIGNING_KEY', `--signing-key ${file} does not exist: pass the private key file of an ed25519 SSH key (ssh-keygen -t ed25519)`);
    mkdirSync(join(homedir(), '.ssh'), { recursive: true, mode: 0o700 });
    keygen(['-q', '-t', 'ed25519', '-N', '', '-C', 'mesh operator', '-f', path]);
    created = true;
  }
  const publicKey = (existsSync(`${path}.pub`) ? readFileSync(`${path}.pub`, 'utf8') : keygen(['-y', '-f', path])).trim();
  try {
    parseSshPublicKey(publicKey);
  } catch (e) {
    throw new MeshError('E_SIGNING_KEY', `${path} is not an ed25519 SSH key (${messageOf(e)}): mesh hosts verify ed25519 signatures only; create one with ssh-keygen -t ed25519 and pass it with --signing-key`);
  }
  return { privateKeyFile: path, publicKey, created };
}

function keygen(args: string[]): string {
  try {
    return execFileSync('ssh-keygen', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    throw new MeshError('E_SIGNING_KEY', `ssh-keygen ${args.join(' ')} failed: ${messageOf(e)}: install OpenSSH's ssh-keygen, or pass --signing-key FILE`);
  }
}
