#!/usr/bin/env node
// `npm run test:system:images [-- RELEASE...]`: build the Debian roots the system tests boot
// (debootstrap, a few minutes each, cached under ~/.cache/mesh/system) ahead of `npm test`, as
// CI's install step does. Every release by default. The tests build a missing one themselves.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'mesh-images-'));
try {
  const out = join(work, 'image.mjs');
  await build({ entryPoints: [join(here, 'image.ts')], bundle: true, platform: 'node', format: 'esm', outfile: out, logLevel: 'warning' });
  const { buildImages, RELEASES } = await import(pathToFileURL(out).href);
  const asked = process.argv.slice(2);
  await buildImages(asked.length ? asked : Object.keys(RELEASES));
} finally {
  rmSync(work, { recursive: true, force: true });
}
