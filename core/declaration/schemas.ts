/**
 * What rendering a declaration needs zod for: the declaration and role schemas, and the readers
 * of vars.yaml and secrets.yaml against theirs. render-with.ts asks for them only when a file
 * needs them (the quick checks answer for plain files, directories and variables, and a node
 * without secrets.yaml needs no secrets reader), so a host's pass loads zod only then.
 */
import { DeclarationFile, RoleFile } from '../../schema/declaration.js';
import { nodeSecrets } from '../secrets/levels.js';
import { readVars } from './vars-file.js';

export const schemas = { DeclarationFile, RoleFile, readVars, nodeSecrets };
export type Schemas = typeof schemas;
/** Gives the schemas: at once where they are loaded anyway, or loaded on first use (agent/main.ts). */
export type LoadSchemas = () => Promise<Schemas>;
