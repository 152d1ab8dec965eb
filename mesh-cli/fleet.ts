/**
 * The operator's checkout of the fleet repo, driven through the git binary (git.ts): commits
 * of the files mesh-cli writes, and one `git cat-file --batch` for reading many blobs at once.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { MeshError, messageOf } from '../core/errors.js';
import { MeshConfig } from '../schema/fleet.js';
import { loadYamlOrThrow } from '../core/load.js';
import { git, spawnGit } from './git.js';

export interface Fleet {
  /** The checkout's top folder. */
  dir: string;
  config: MeshConfig;
  /** The checkout's object format (sha1, sha256), as git said when the checkout was found. */
  objectFormat?: string;
}

/** The fleet checkout containing `cwd`; an error that says what to do when there is none. */
export async function openFleet(cwd: string): Promise<Fleet> {
  // Where the checkout is, and its object format (the report store is made in it): one git process (a git older than 2.25 knows only the first).
  const [top, objectFormat] = (await git(cwd, ['rev-parse', '--show-toplevel', '--show-object-format']).catch(() => '')).trim().split('\n');
  const dir = top || (await topOf(cwd));
  if (!dir) throw new MeshError('E_NOT_A_FLEET', `${cwd} is not inside a git checkout of a fleet repo: cd into one, or create one with 'mesh-cli init DIR'`);
  const meshYaml = join(dir, 'mesh.yaml');
  let text: string;
  try {
    text = readFileSync(meshYaml, 'utf8');
  } catch {
    throw new MeshError('E_NOT_A_FLEET', `${dir} has no mesh.yaml: this is not a fleet repo (create one with 'mesh-cli init DIR')`);
  }
  return { dir, config: loadYamlOrThrow(text, 'mesh.yaml', MeshConfig), ...(objectFormat ? { objectFormat } : {}) };
}

/** The top folder of the git checkout that holds `cwd`, or null when there is none. */
export async function topOf(cwd: string): Promise<string | null> {
  return (await git(cwd, ['rev-parse', '--show-toplevel']).catch(() => '')).trim() || null;
}

/** Commit `paths` in the checkout at `dir` with `message`, using a fallback identity when the operator has none configured; the new commit's id. */
export async function commitPaths(dir: string, paths: string[], message: string): Promise<string> {
  await git(dir, ['add', '--', ...paths]);
  const configured = async (key: string) => (await git(dir, ['config', '--get', key]).catch(() => '')).trim() !== '';
  const named = (await configured('user.name')) && (await configured('user.email'));
  const identity = named ? [] : ['-c', 'user.name=mesh-cli', '-c', 'user.email=mesh-cli@localhost'];
  await git(dir, [...identity, 'commit', '--quiet', '-m', message, '--', ...paths]);
  return (await git(dir, ['rev-parse', 'HEAD'])).trim();
}

/**
 * Make `change` to `paths` (absolute paths of files in the checkout at `dir`; `change` writes or
 * removes them) and commit them alone with `message`, then `settle` what must follow the commit
 * (a token's file). When the commit fails (the signing key not at hand, a hook that refused it), or
 * `settle` does, the commit is taken back and each file put back as it was and unstaged, so that the
 * same command run again starts from where this one did (a token issued again is not one generation on).
 */
export async function commitChange(dir: string, paths: string[], message: string, change: () => void, settle?: (commit: string) => void): Promise<string> {
  const before = paths.map((path) => [path, existsSync(path) ? readFileSync(path) : null, newFolder(dir, path)] as const);
  let commit: string | null = null;
  try {
    change();
    commit = await commitPaths(dir, paths, message);
    settle?.(commit);
    return commit;
  } catch (e) {
    if (commit !== null) await takeBack(dir, commit, e);
    for (const [path, bytes, folder] of before) {
      if (bytes !== null) writeFileSync(path, bytes);
      else rmSync(folder ?? path, { recursive: true, force: true });
    }
    await git(dir, ['reset', '--quiet', '--', ...paths]).catch(() => undefined);
    throw e;
  }
}

/** The outermost folder on the way from `dir` to `path` that does not exist yet (a new node's), or null. */
function newFolder(dir: string, path: string): string | null {
  const steps = relative(dir, dirname(path)).split(sep);
  for (let i = 1; i <= steps.length; i++) {
    const folder = join(dir, ...steps.slice(0, i));
    if (!existsSync(folder)) return folder;
  }
  return null;
}

/**
 * Take back `commit` (the checkout's HEAD, just made) when what had to follow it failed with `e`;
 * its files are put back by the caller. When git cannot, say which commit is left to undo by hand.
 */
async function takeBack(dir: string, commit: string, e: unknown): Promise<void> {
  try {
    await git(dir, ['reset', '--quiet', '--soft', `${commit}~1`]);
  } catch (undo) {
    throw new MeshError('E_COMMIT_KEPT', `${messageOf(e)}; and taking back its commit ${commit.slice(0, 12)} failed (${messageOf(undo)}): run 'git reset --keep HEAD~1' in ${dir} before anything is pushed`, { cause: e });
  }
}

/** The URL of the checkout's `origin` remote, or null when it has none. */
export async function originUrl(dir: string, direction: 'fetch' | 'push' = 'fetch'): Promise<string | null> {
  return (await git(dir, ['remote', 'get-url', ...(direction === 'push' ? ['--push'] : []), 'origin']).catch(() => '')).trim() || null;
}

/** Read many `rev:path` objects with one `git cat-file --batch`; missing objects map to null. */
export function catFiles(dir: string, specs: string[]): Promise<Map<string, Buffer | null>> {
  return new Promise((resolve, reject) => {
    const child = spawnGit(dir, ['cat-file', '--batch']);
    child.stderr.pipe(process.stderr);
    const chunks: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => chunks.push(b));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new MeshError('E_GIT', `git cat-file exited with ${code}`));
      resolve(parseBatch(Buffer.concat(chunks), specs));
    });
    child.stdin.end(specs.map((s) => s + '\n').join(''));
  });
}

function parseBatch(out: Buffer, specs: string[]): Map<string, Buffer | null> {
  const result = new Map<string, Buffer | null>();
  let at = 0;
  for (const spec of specs) {
    const eol = out.indexOf(10, at);
    const header = out.subarray(at, eol).toString();
    at = eol + 1;
    if (header.endsWith(' missing') || header.endsWith(' ambiguous')) {
      result.set(spec, null);
      continue;
    }
    const size = Number(header.split(' ')[2]);
    result.set(spec, out.subarray(at, at + size));
    at += size + 1;
  }
  return result;
}
