#!/usr/bin/env node
// Bundles mesh-cli and mesh-host into single files in dist/ (the host ships to machines as
// one file). `--schema` also writes the JSON Schema files for editors into schema/json/.
import { build } from 'esbuild';
import { builtinModules } from 'node:module';
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const version = process.env.MESH_BUILD_VERSION ?? JSON.parse(readFileSync(join(top, 'package.json'), 'utf8')).version;
// esbuild hoists every `import ... from 'node:x'` to the top of the bundle, so each process
// would load http, tls, zlib and the rest even when the command it runs imports them lazily
// (main.ts imports each command when it runs). This plugin turns those imports into requires
// made when the importing module is first evaluated: a short `apply` then loads only the
// built-ins it uses. Behaviour is unchanged; named imports become property reads. The ones
// Node has loaded before any user code runs stay plain imports (nothing to save there).
const preloaded = new Set(['events', 'buffer', 'path', 'querystring', 'async_hooks', 'timers', 'util', 'fs', 'url', 'string_decoder', 'process', 'module']);
const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(b) {
    const names = new Set(builtinModules.filter((m) => !preloaded.has(m)).flatMap((m) => [m, `node:${m}`]));
    b.onResolve({ filter: /^[a-z_/:]+$/ }, (args) => {
      if (args.kind !== 'import-statement' || !names.has(args.path) || args.namespace === 'lazy-builtin') return undefined;
      return { path: args.path.replace(/^node:/, ''), namespace: 'lazy-builtin' };
    });
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(`node:${args.path}`)});`, loader: 'js' }));
  },
};
const common = {
  plugins: [lazyBuiltins],
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
// Compiling the host's bundle is a fixed cost of every process, and most of it would be the
// libraries a short `apply` never runs (git, the logger, and the YAML parser and schemas that
// a cached declaration does not need): V8 parses every function in a file before it runs any.
// So in mesh-host each of these libraries is bundled on its own and kept in the file as a
// string, compiled the first time something requires it (vm.compileFunction, with a file name
// that says which library a stack frame is in). It is still one file. liquidjs, age-encryption (with
// the @noble libraries it carries) and pino-pretty are ~380 KB of code that most passes never run
// (templates, secrets, a log drawn for a terminal): their modules require them when first used
// (core/declaration/template.ts, agent/log.ts) or are imported lazily (the secrets' modules),
// so that a pass without them neither decodes nor scans them.
// mesh-cli carries the same libraries the same way, all but zod: its main.ts imports only the
// module of the command that runs, so `status` never compiles git's, the logger's or the
// secrets' libraries; zod it needs at once (every schema), and a string costs it more than
// the bundle's own lazy compile (measured: `status --help` 180 ms, against 210 ms bundled and
// 215 ms with zod a string as well).
const VENDORED = ['isomorphic-git', 'isomorphic-git/http/node', 'pino', 'yaml', 'zod', 'pino-pretty', 'age-encryption', 'liquidjs'];
// commander too, in mesh-host alone: a pass in its plain form is read without it
// (agent/quick-args.ts), while mesh-cli reads every command line with it.
const HOST_VENDORED = [...VENDORED, 'commander'];
const VENDOR_PACKING = process.env.MESH_BUILD_VENDOR ?? 'brotli';
const packed = (code) => (VENDOR_PACKING === 'plain' ? JSON.stringify(code) : JSON.stringify('br:' + brotliCompressSync(Buffer.from(code), { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 11, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: code.length } }).toString('base64')));
const unpack = VENDOR_PACKING === 'plain' ? '' : "if (code.startsWith('br:')) code = require('node:zlib').brotliDecompressSync(Buffer.from(code.slice(3), 'base64')).toString();";
/** `__meshVendor(name, code)`: compile a library carried as a string; `file` is the bundle's path (an expression). */
const vendorBody = (file) => `const __meshVendor = (name, code) => { ${unpack} const module = { exports: {} }; const file = ${file}; __meshCompile(code, ['exports', 'require', 'module', '__filename', '__dirname'], { filename: file + '#vendor/' + name })(module.exports, require, module, file, file.slice(0, file.lastIndexOf('/'))); return module.exports; };`;
const vendorBanner = `import { compileFunction as __meshCompile } from 'node:vm'; ${vendorBody('new URL(import.meta.url).pathname')}`;
/** Each vendored library bundled on its own, as the string a bundle carries: made once, for both bundles. */
const vendorStrings = {};
for (const name of HOST_VENDORED) {
  const out = await build({ stdin: { contents: `module.exports = require(${JSON.stringify(name)});`, resolveDir: top }, bundle: true, platform: 'node', target: 'node20', format: 'cjs', logLevel: 'warning', minifyWhitespace: true, write: false });
  vendorStrings[name] = packed(out.outputFiles[0].text);
}
/** The plugin that puts each of `names` into a bundle as its string. */
function vendored(names) {
  return {
    name: 'vendored',
    setup(b) {
      b.onResolve({ filter: /^[a-z]/ }, (args) => (args.namespace !== 'vendored' && names.includes(args.path) ? { path: args.path, namespace: 'vendored' } : undefined));
      b.onLoad({ filter: /.*/, namespace: 'vendored' }, (args) => ({ contents: `module.exports = __meshVendor(${JSON.stringify(args.path)}, ${vendorStrings[args.path]});`, loader: 'js' }));
    },
  };
}

// mesh-host is a guest on every machine: V8 would grow its young generation to 2 x 16 MB while
// a large declaration is parsed, which alone is a third of the resident memory of a 1,000-file
// pass. Keeping it at its first size costs a few per cent of CPU on such passes and none on
// passes that change nothing (measured with `npm run bench`).
// And V8 waits ten times longer than its default before it optimizes a function: a pass is a
// short process on a small machine, and the ~20 functions it would optimize were compiled on a
// second thread that the pass itself needs (drift passes in turn, 15 pairs, four rounds: 0.92 to
// 0.98 of the wall with the default); a long-running `mesh-host run` still optimizes its hot code.
const hostBanner = `'use strict'; require('node:v8').setFlagsFromString('--semi-space-growth-factor=1 --ticks-before-optimization=30'); const { compileFunction: __meshCompile } = require('node:vm'); const __meshUrl = require('node:url').pathToFileURL(__filename).href; ${vendorBody('__filename')}`;

// mesh-cli status verifies reports on threads that run mesh-cli/verify-worker.ts, bundled on its
// own (only the signature code) and carried in mesh-cli.mjs as a string (mesh-cli/verify-pool.ts).
const verifyWorker = (await build({ ...common, plugins: [], banner: undefined, format: 'cjs', entryPoints: [join(top, 'mesh-cli/verify-worker.ts')], write: false })).outputFiles[0].text;

const outdir = process.env.MESH_BUILD_OUT ?? join(top, 'dist');
// mesh-host is CommonJS (mesh-host.cjs): Node starts a CommonJS file without its ES module
// loader, ~6 % of a short pass (measured with drift passes in turn). Its one `import.meta.url`
// (declaration-cache.ts) is the file's URL here too; its code stays in strict mode, as a module's
// is. A mesh-host.mjs left by an older build is removed: it would run old code.
rmSync(join(outdir, 'mesh-host.mjs'), { force: true });
const entries = { 'mesh-host.cjs': 'agent/main.ts', 'mesh-cli.mjs': 'mesh-cli/main.ts' };
for (const [file, entry] of Object.entries(entries)) {
  const outfile = join(outdir, file);
  const host = file === 'mesh-host.cjs'
    ? { format: 'cjs', define: { ...common.define, 'import.meta.url': '__meshUrl' }, banner: { js: hostBanner }, plugins: [...common.plugins, vendored(HOST_VENDORED)] }
    : { define: { ...common.define, __MESH_VERIFY_WORKER__: JSON.stringify(verifyWorker) }, banner: { js: `${common.banner.js} ${vendorBanner}` }, plugins: [...common.plugins, vendored(VENDORED.filter((n) => n !== 'zod'))] };
  await build({ ...common, ...host, entryPoints: [join(top, entry)], outfile });
  chmodSync(outfile, 0o755);
}

if (process.argv.includes('--schema')) {
  const outfile = join(top, 'dist/.write-schema.mjs');
  await build({ ...common, banner: {}, stdin: { contents: "import { writeJsonSchemas } from './schema/json.js'; console.log(writeJsonSchemas(process.argv[2]).map((f) => 'schema/json/' + f).join('\\n'));", resolveDir: top, loader: 'ts' }, outfile });
  process.argv[2] = join(top, 'schema/json');
  await import(pathToFileURL(outfile).href);
  rmSync(outfile);
}
