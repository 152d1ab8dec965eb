/** schema/json/: the JSON Schema files editors read stay what the schemas say (`node scripts/build.mjs --schema` writes them). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeJsonSchemas } from '../schema/json.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();

describe('schema/json', () => {
  it('holds exactly what the schemas write: a field added to a schema reaches the editors', () => {
    const dir = tmp('mesh-schema-');
    for (const file of writeJsonSchemas(dir)) {
      expect(readFileSync(join('schema/json', file), 'utf8'), `schema/json/${file} is stale: run 'node scripts/build.mjs --schema'`).toBe(readFileSync(join(dir, file), 'utf8'));
    }
  });
});
