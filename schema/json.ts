/** Writes JSON Schema files for editors (yaml-language-server, VS Code) into schema/json/. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { DeclarationFile, RoleFile } from './declaration.js';
import { MeshConfig, NodeIdentity } from './fleet.js';
import { Report } from './report.js';
import { TokenFile } from './token.js';
import { VarsFile } from './vars.js';
import { SecretsFile } from './secrets.js';

const schemas: Record<string, z.ZodType> = {
  'declaration.schema.json': DeclarationFile,
  'role.schema.json': RoleFile,
  'mesh.schema.json': MeshConfig,
  'node.schema.json': NodeIdentity,
  'report.schema.json': Report,
  'token.schema.json': TokenFile,
  'vars.schema.json': VarsFile,
  'secrets.schema.json': SecretsFile,
};

/** Write every schema into `dir`; returns the file names written. */
export function writeJsonSchemas(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  return Object.entries(schemas).map(([file, schema]) => {
    const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
    writeFileSync(join(dir, file), JSON.stringify(json, null, 2) + '\n');
    return file;
  });
}
