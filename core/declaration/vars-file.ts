/**
 * Reading one `vars.yaml` against its schema (vars.ts reads the usual ones without it, and asks
 * this module for the rest): kept apart so that a pass whose variables are plain loads no zod.
 */
import type { Problem } from '../errors.js';
import { loadYaml } from '../load.js';
import { VarsFile } from '../../schema/vars.js';
import type { VarsLevel } from './vars-levels.js';

/** Read one `vars.yaml`: a map of variable names to values (an empty file is no variables). */
export function readVars(text: string, file: string): { ok: true; level: VarsLevel } | { ok: false; problems: Problem[] } {
  if (text.trim() === '') return { ok: true, level: { file, values: {} } };
  const loaded = loadYaml(text, file, VarsFile);
  if (!loaded.ok) {
    const notMap = loaded.problems.find((p) => /expected record/.test(p.message));
    return { ok: false, problems: notMap ? [{ ...notMap, message: 'vars.yaml must be a map of variable names to values, e.g. "port: 8080"' }] : loaded.problems };
  }
  return { ok: true, level: { file, values: loaded.value } };
}

