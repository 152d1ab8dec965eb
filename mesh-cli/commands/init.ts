/**
 * `mesh-cli init DIR`: a new fleet repo from examples/fleet-repo, as a git repository with a
 * first commit: mesh.yaml, nodes/, roles/, a README, and a ready CI workflow
 * (.github/workflows/mesh.yml: validate and plan on pull requests, the rollout after merge).
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simpleGit } from 'simple-git';
import { MeshError } from '../../agent/errors.js';
import { commitPaths } from '../fleet.js';

/** Create the fleet repo in `dir` (which must be missing or empty); returns the first commit. */
export async function initFleet(dir: string, name = basename(resolve(dir))): Promise<string> {
  const target = resolve(dir);
  if (existsSync(target) && readdirSync(target).length > 0) throw new MeshError('E_NOT_EMPTY', `${target} is not empty: pick a new folder for the fleet repo`);
  mkdirSync(target, { recursive: true });
  cpSync(exampleDir(), target, { recursive: true });
  const meshYaml = join(target, 'mesh.yaml');
  writeFileSync(meshYaml, readFileSync(meshYaml, 'utf8').replace(/^name: .*$/m, `name: ${name}`));
  const git = simpleGit({ baseDir: target });
  await git.init(['--initial-branch=main']);
  return commitPaths(git, ['.'], `mesh: new fleet ${name}`);
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
