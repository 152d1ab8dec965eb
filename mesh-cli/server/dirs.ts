import { access, constants, realpath, stat } from 'node:fs/promises';
import { MeshError } from '../../core/errors.js';

/** The real path of a folder the server must read, or a MeshError that says what to do about it. */
export async function checkedDir(dir: string, what: 'data' | 'packages'): Promise<string> {
  const flag = `--${what}`;
  const fix = what === 'data'
    ? `pass ${flag} a folder that holds bare repositories (create one with: git init --bare ${dir}/fleet.git)`
    : `pass ${flag} the folder of the fleet's apt repository`;
  let real: string;
  try {
    real = await realpath(dir);
  } catch {
    throw new MeshError('E_SERVE_DIR', `${flag} ${dir} does not exist: ${fix}`, { data: { [what]: dir } });
  }
  if (!(await stat(real)).isDirectory()) {
    throw new MeshError('E_SERVE_DIR', `${flag} ${dir} is not a folder: ${fix}`, { data: { [what]: dir } });
  }
  try {
    await access(real, constants.R_OK | constants.X_OK);
  } catch {
    throw new MeshError('E_SERVE_DIR', `${flag} ${dir} is not readable by this user: fix its permissions or run as its owner`, {
      data: { [what]: dir },
    });
  }
  return real;
}
