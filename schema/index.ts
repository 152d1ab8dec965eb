/** Every file format of mesh, as zod schemas. `npm run schema` writes them as JSON Schema to schema/json/. */
export * from './declaration.js';
export * from './fleet.js';
export * from './report.js';
export * from './token.js';
export * from './facts.js';
export * from './vars.js';
export * from './secrets.js';
