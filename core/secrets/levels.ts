/**
 * A node's secrets, from `nodes/secrets.yaml` through each group's down to its own: the same
 * levels and rule as variables (vars.ts), so the closer level replaces a whole entry and `null`
 * unsets it. Nothing here decrypts: an entry is its armored block, the recipients it lists, and
 * where it was written (the file, line and column that `validate` names).
 */
import type { Problem } from '../errors.js';
import { levelsOf, type NodePlace } from '../fleet/layout.js';
import { keyPositionIn, loadYaml } from '../load.js';
import { SecretsFile, type SecretEntry } from '../../schema/secrets.js';

export const SECRETS_FILE = 'secrets.yaml';

/** One secret as a level's file holds it, with its place. */
export interface PlacedSecret {
  name: string;
  entry: SecretEntry;
  /** The file that holds it, e.g. nodes/db/secrets.yaml. */
  file: string;
  /** The level (folder) of that file: every node at or below it needs the secret. */
  level: string;
  line: number;
  col: number;
}

/** Read one secrets.yaml: its entries with their places (null for a name it unsets). */
export function readSecrets(text: string, file: string): { ok: true; entries: Map<string, PlacedSecret | null> } | { ok: false; problems: Problem[] } {
  const entries = new Map<string, PlacedSecret | null>();
  if (text.trim() === '') return { ok: true, entries };
  const loaded = loadYaml(text, file, SecretsFile);
  if (!loaded.ok) {
    const notMap = loaded.problems.find((p) => /expected record/.test(p.message));
    return { ok: false, problems: notMap ? [{ ...notMap, message: 'secrets.yaml must be a map of secret names to entries; write it with mesh-cli secret set NAME' }] : loaded.problems };
  }
  const level = file.slice(0, file.lastIndexOf('/'));
  for (const [name, entry] of Object.entries(loaded.value)) {
    entries.set(name, entry === null ? null : { name, entry, file, level, ...keyPositionIn(text, [], name) });
  }
  return { ok: true, entries };
}

/** The secrets of a node whose levels' files are `files` (outermost first), layered: the closer level replaces the whole entry. */
export function layerSecrets(levels: Map<string, PlacedSecret | null>[]): Map<string, PlacedSecret> {
  const out = new Map<string, PlacedSecret>();
  for (const level of levels) {
    for (const [name, placed] of level) {
      out.delete(name); // a replaced name takes the closer file's place in the order
      if (placed !== null) out.set(name, placed);
    }
  }
  return out;
}

/** `place`'s secrets read from `read` (a fleet commit or checkout): every level's secrets.yaml that exists, layered. */
export async function nodeSecrets(read: (path: string) => Promise<string | null>, place: NodePlace): Promise<{ secrets: Map<string, PlacedSecret>; files: string[]; problems: Problem[] }> {
  const levels: Map<string, PlacedSecret | null>[] = [];
  const files: string[] = [];
  const problems: Problem[] = [];
  for (const level of levelsOf(place)) {
    const file = `${level}/${SECRETS_FILE}`;
    const text = await read(file);
    if (text === null) continue;
    files.push(file);
    const loaded = readSecrets(text, file);
    if (loaded.ok) levels.push(loaded.entries);
    else problems.push(...loaded.problems);
  }
  return { secrets: layerSecrets(levels), files, problems };
}
