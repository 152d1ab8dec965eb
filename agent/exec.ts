/** The real process runner handed to resource handlers (no shell; output collected; never throws on exit codes). */
import { spawn } from 'node:child_process';
import type { Exec } from './resources/handler.js';

/** A runner whose programs get the environment `base` (main.ts hands in the process's own), with each call's `env` on top. */
export const processRunner =
  (base: NodeJS.ProcessEnv): Exec =>
  (cmd, args, opts = {}) =>
    new Promise((resolve) => {
      const child = spawn(cmd, args, { env: { ...base, ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'], timeout: opts.timeoutMs ?? 10 * 60_000 });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (b: Buffer) => out.push(b));
      child.stderr.on('data', (b: Buffer) => err.push(b));
      child.on('error', (e) => resolve({ code: 127, stdout: '', stderr: `${cmd}: ${e.message}` }));
      child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
      child.stdin.on('error', () => undefined); // a program that exits without reading its input is not an error
      child.stdin.end(opts.input ?? '');
    });
