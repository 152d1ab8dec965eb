/**
 * The operator's checkout of the fleet repo, driven through the git binary (simple-git for
 * porcelain, one `git cat-file --batch` for reading many blobs at once).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { simpleGit, type SimpleGit } from 'simple-git';
import { MeshError } from '../agent/errors.js';
import { MeshConfig } from '../schema/fleet.js';
import { loadYamlOrThrow } from '../schema/load.js';

export interface Fleet {
  dir: string;
  git: SimpleGit;
  config: MeshConfig;
}

/** The fleet checkout containing `cwd`; an error that says what to do when there is none. */
export async function openFleet(cwd: string): Promise<Fleet> {
  const git = simpleGit({ baseDir: cwd });
  const dir = await git.revparse(['--show-toplevel']).catch(() => null);
  if (!dir) throw new MeshError('E_NOT_A_FLEET', `${cwd} is not inside a git checkout of a fleet repo: cd into one, or create one with 'mesh-cli init DIR'`);
  const meshYaml = join(dir, 'mesh.yaml');
  let text: string;
  try {
    text = readFileSync(meshYaml, 'utf8');
  } catch {
    throw new MeshError('E_NOT_A_FLEET', `${dir} has no mesh.yaml: this is not a fleet repo (create one with 'mesh-cli init DIR')`);
  }
  return { dir, git: simpleGit({ baseDir: dir }), config: loadYamlOrThrow(text, 'mesh.yaml', MeshConfig) };
}

/** Commit `paths` with `message`, using a fallback identity when the operator has none configured. */
export async function commitPaths(git: SimpleGit, paths: string[], message: string): Promise<string> {
  await git.add(paths);
  const named = (await git.getConfig('user.name')).value && (await git.getConfig('user.email')).value;
  const committer = named ? git : simpleGit({ baseDir: await git.revparse(['--show-toplevel']), config: ['user.name=mesh-cli', 'user.email=mesh-cli@localhost'] });
  const result = await committer.commit(message, paths);
  return result.commit;
}

/** Read many `rev:path` objects with one `git cat-file --batch`; missing objects map to null. */
export function catFiles(dir: string, specs: string[]): Promise<Map<string, Buffer | null>> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', ['cat-file', '--batch'], { cwd: dir, stdio: ['pipe', 'pipe', 'inherit'] });
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
