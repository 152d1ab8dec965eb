/**
 * Files a person names on the command line for mesh-cli to write (`status --html FILE`,
 * `signers --out FILE`): checked before the command's work, so that a folder that does not exist
 * is said at once rather than after a fetch, and a write that fails is a person's error (exit 2)
 * with the file and what to do, not an internal one.
 */
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { MeshError } from '../core/errors.js';

/** Refuse `file` (given as `option`) when its folder does not exist, or it is a folder itself. */
export function checkOutFile(file: string, option: string): void {
  const folder = dirname(resolve(file));
  if (!existsSync(folder)) throw new MeshError('E_OUT_FILE', `${option} ${file}: the folder ${folder} does not exist: create it, or name a file in a folder that does; nothing was done`);
  if (existsSync(file) && statSync(file).isDirectory()) throw new MeshError('E_OUT_FILE', `${option} ${file} is a folder: name a file (e.g. ${file.replace(/\/+$/, '')}/fleet.html); nothing was done`);
}

/** Write `text` to `file` (given as `option`), a failure named as the person's to fix. */
export function writeOutFile(file: string, text: string, option: string): void {
  try {
    writeFileSync(file, text);
  } catch (e) {
    throw new MeshError('E_OUT_FILE', `cannot write ${option} ${file}: ${(e as Error).message}`);
  }
}
