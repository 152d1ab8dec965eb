/**
 * A node's variables (vars.ts adds the schema's reader; this module loads no schema), from `nodes/vars.yaml` through each group's `vars.yaml` down to its own:
 * the closer level replaces the whole top-level key (no deep merge, lists never merged) and
 * `null` unsets it — the rule of Hiera's `first`, Helm and Ansible's default. Every value
 * remembers the file that set it and the files it replaced, for `mesh-cli vars --explain`.
 */
import type { Problem } from '../errors.js';
import { levelsOf, type NodePlace } from '../fleet/layout.js';
import { MAX_FILE_BYTES } from '../load.js';
import { parsePlainYaml } from '../yaml-plain.js';
import { fastVarsFile } from '../../schema/declaration-fast.js';

/** One level's variables as read from its file. */
export interface VarsLevel {
  file: string;
  values: Record<string, unknown>;
}

/** Where a variable's value came from. */
export interface VarOrigin {
  /** The file that set the value in force (or unset it, for an unset name). */
  file: string;
  /** Files further out whose value for the same name it replaced, outermost first. */
  replaced: string[];
}

export interface LayeredVars {
  /** The values templates see as `vars`. */
  values: Record<string, unknown>;
  /** For each name in `values`, where it was set. */
  origins: Record<string, VarOrigin>;
  /** Names a closer level unset with null, with where. */
  unset: Record<string, VarOrigin>;
}

/** The variables of a node whose levels are `levels`, outermost first. */
export function layerVars(levels: VarsLevel[]): LayeredVars {
  const values: Record<string, unknown> = Object.create(null);
  const origins: Record<string, VarOrigin> = Object.create(null);
  const unset: Record<string, VarOrigin> = Object.create(null);
  for (const { file, values: level } of levels) {
    for (const [name, value] of Object.entries(level)) {
      const before = origins[name] ?? unset[name];
      const replaced = before ? [...before.replaced, ...(name in origins ? [before.file] : [])] : [];
      if (value === null) {
        delete origins[name];
        delete values[name];
        unset[name] = { file, replaced };
      } else {
        delete unset[name];
        values[name] = value; // a replaced name keeps its place: output follows the outermost file's order
        origins[name] = { file, replaced };
      }
    }
  }
  return { values: { ...values }, origins: { ...origins }, unset: { ...unset } };
}

/** Reads one vars.yaml against the schema (vars-file.ts `readVars`). */
export type ReadVars = (text: string, file: string) => { ok: true; level: VarsLevel } | { ok: false; problems: Problem[] };

/** `place`'s variables read from `read` (a fleet commit or checkout): every level's vars.yaml that exists, layered; `slow` is asked for the schema's reader only for a file the quick reader cannot tell. */
export async function varsWith(read: (path: string) => Promise<string | null>, place: NodePlace, slow: () => Promise<ReadVars>): Promise<{ vars: LayeredVars; files: string[]; problems: Problem[] }> {
  const levels: VarsLevel[] = [];
  const problems: Problem[] = [];
  for (const level of levelsOf(place)) {
    const file = `${level}/vars.yaml`;
    const text = await read(file);
    if (text === null) continue;
    const loaded = quickVars(text, file) ?? (await slow())(text, file);
    if (loaded.ok) levels.push(loaded.level);
    else problems.push(...loaded.problems);
  }
  return { vars: layerVars(levels), files: levels.map((l) => l.file), problems };
}

/**
 * readVars (vars-file.ts) for the usual vars.yaml, a map of names to plain values, without
 * loading the schema; null when it cannot tell, and readVars answers (with every problem placed).
 */
function quickVars(text: string, file: string): { ok: true; level: VarsLevel } | null {
  if (text.trim() === '') return { ok: true, level: { file, values: {} } };
  if (text.length > MAX_FILE_BYTES / 4 || text.includes('\uFFFD')) return null;
  const data = parsePlainYaml(text);
  const values = data === undefined ? undefined : fastVarsFile(data ?? {});
  return values === undefined ? null : { ok: true, level: { file, values } };
}
