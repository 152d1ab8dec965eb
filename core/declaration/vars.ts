/**
 * A node's variables (vars-levels.ts), with the schema's reader for the files the quick reader
 * cannot tell (vars-file.ts): what mesh-cli and the tests use. The host's parser uses
 * vars-levels.ts with a reader it loads only when it is needed.
 */
import type { NodePlace } from '../fleet/layout.js';
import type { Problem } from '../errors.js';
import { readVars } from './vars-file.js';
import { varsWith, type LayeredVars } from './vars-levels.js';

export { readVars } from './vars-file.js';
export { layerVars, type LayeredVars, type VarOrigin, type VarsLevel } from './vars-levels.js';

/** `place`'s variables read from `read` (a fleet commit or checkout): every level's vars.yaml that exists, layered. */
export function nodeVars(read: (path: string) => Promise<string | null>, place: NodePlace): Promise<{ vars: LayeredVars; files: string[]; problems: Problem[] }> {
  return varsWith(read, place, async () => readVars);
}
