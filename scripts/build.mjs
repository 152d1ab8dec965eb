#!/usr/bin/env node
// Bundles mesh-cli and mesh-host into single files in dist/ (the host ships to machines as
// one file). `--schema` also writes the JSON Schema files for editors into schema/json/.
import { build } from 'esbuild';
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const version = process.env.MESH_BUILD_VERSION ?? JSON.parse(readFileSync(join(top, 'package.json'), 'utf8')).version;
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  logLevel: 'warning',
  define: { __MESH_VERSION__: JSON.stringify(version) },
  // Smaller bundles load faster. Whitespace only: names and statements stay as written, so that
  // a bug's stack trace still names its functions (and tests can still patch a bundle).
  minifyWhitespace: true,
  banner: { js: "import { createRequire as __meshRequire } from 'node:module'; const require = __meshRequire(import.meta.url);" },
};
// mesh-host is a guest on every machine: V8 would grow its young generation to 2 x 16 MB while
// a large declaration is parsed, which alone is a third of the resident memory of a 1,000-file
// pass. Keeping it at its first size costs a few per cent of CPU on such passes and none on
// passes that change nothing (measured with `npm run bench`).
const hostBanner = common.banner.js + " import __meshV8 from 'node:v8'; __meshV8.setFlagsFromString('--semi-space-growth-factor=1');";

const outdir = process.env.MESH_BUILD_OUT ?? join(top, 'dist');
const entries = { 'mesh-host': 'agent/main.ts', 'mesh-cli': 'mesh-cli/main.ts' };
for (const [name, entry] of Object.entries(entries)) {
  const outfile = join(outdir, `${name}.mjs`);
  await build({ ...common, ...(name === 'mesh-host' ? { banner: { js: hostBanner } } : {}), entryPoints: [join(top, entry)], outfile });
  chmodSync(outfile, 0o755);
}

if (process.argv.includes('--schema')) {
  const outfile = join(top, 'dist/.write-schema.mjs');
  await build({ ...common, banner: {}, stdin: { contents: "import { writeJsonSchemas } from './schema/json.js'; console.log(writeJsonSchemas(process.argv[2]).map((f) => 'schema/json/' + f).join('\\n'));", resolveDir: top, loader: 'ts' }, outfile });
  process.argv[2] = join(top, 'schema/json');
  await import(pathToFileURL(outfile).href);
  rmSync(outfile);
}
