/**
 * A sign of life during a long pass: on a terminal, a line every second or every tenth of the
 * steps once the pass has run a second; nothing when stderr is not a terminal (a journal, a pipe).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { progressLines } from '../agent/progress.js';
import { MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

describe('progressLines', () => {
  it('says nothing in the first second, then a line per second or per tenth, and nothing for the last step', () => {
    let t = 0;
    const lines: string[] = [];
    const progress = progressLines((l) => lines.push(l), () => t);
    for (let done = 1; done <= 100; done++) {
      t = done * 50; // 20 steps a second: the pass takes 5 s
      progress(done, 100, `file:/etc/f${done}`);
    }
    expect(lines).toEqual([
      'applying: 21/100 (21 %), file:/etc/f21', // a second after the first step, with two tenths crossed
      'applying: 30/100 (30 %), file:/etc/f30',
      'applying: 40/100 (40 %), file:/etc/f40',
      'applying: 50/100 (50 %), file:/etc/f50',
      'applying: 60/100 (60 %), file:/etc/f60',
      'applying: 70/100 (70 %), file:/etc/f70',
      'applying: 80/100 (80 %), file:/etc/f80',
      'applying: 90/100 (90 %), file:/etc/f90',
    ]);
  });

  it('on a slow pass of few steps, a line for each step that took a second', () => {
    let t = 0;
    const lines: string[] = [];
    const progress = progressLines((l) => lines.push(l), () => t);
    for (const [done, at] of [[1, 100], [2, 1500], [3, 1600], [4, 3000], [5, 3100]] as const) {
      t = at;
      progress(done, 40, `step${done}`);
    }
    expect(lines).toEqual(['applying: 2/40 (5 %), step2', 'applying: 4/40 (10 %), step4']);
  });
});

describe('mesh-host apply on a long pass', () => {
  it('shows progress on a terminal and none in a pipe', async () => {
    const dir = tempDir('mesh-progress-');
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle);
    const files = Array.from({ length: 1000 }, (_, i) => `  - type: file\n    path: /srv/f${i}\n    content: "${i}\\n"\n`);
    writeFileSync(join(bundle, 'base.yaml'), `resources:\n${files.join('')}`);
    const piped = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--root', newMachine(join(dir, 'piped'))], dir, { MESH_PROGRESS_AFTER_MS: '0' });
    expect(piped.code).toBe(0);
    expect(piped.stdout + piped.stderr).not.toContain('applying:');
    // util-linux script gives the host a terminal. How long a pass takes depends on the machine (1,000 files take well under
    // a second on a quiet one), so the first second is set to none here: a line at each tenth (the timing is tested above).
    const host = `MESH_PROGRESS_AFTER_MS=0 node ${MESH_HOST} apply --bundle ${bundle} --root ${newMachine(join(dir, 'tty'))}`;
    const tty = await runProgram('script', ['-qec', host, '/dev/null'], dir);
    expect(tty.code, tty.stdout).toBe(0);
    expect(tty.stdout).toMatch(/applying: \d+\/1000 \(\d+ %\), file:\/srv\/f\d+/);
    expect(tty.stdout).toMatch(/^applied: 1000 changed/m);
  });
});
