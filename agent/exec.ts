/** The real process runner handed to resource handlers (no shell; output collected; never throws on exit codes). */
import { spawn } from 'node:child_process';
import type { Exec } from './resources/handler.js';

/** A runner whose programs get the environment `base` (main.ts hands in the process's own), with each call's `env` on top. */
export const processRunner =
  (base: NodeJS.ProcessEnv): Exec =>
  (cmd, args, opts = {}) =>
    new Promise((resolve) => {
      const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
      // A group is killed whole by its own timer: spawn's timeout would kill only the leader, and a shell's children would keep the output open.
      // Node gives a child no supplementary groups of its own: setpriv (util-linux) sets them, then the ids, then runs the program.
      const as = opts.groups !== undefined && opts.uid !== undefined;
      const ids = as ? {} : { ...(opts.uid === undefined ? {} : { uid: opts.uid }), ...(opts.gid === undefined ? {} : { gid: opts.gid }) };
      const [program, argv] = as ? ['setpriv', [`--reuid=${opts.uid}`, `--regid=${opts.gid ?? opts.uid}`, opts.groups!.length > 0 ? `--groups=${opts.groups!.join(',')}` : '--clear-groups', '--', cmd, ...args]] : [cmd, args];
      const child = spawn(program, argv, { env: { ...base, ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'], cwd: opts.cwd, ...ids, detached: opts.group === true, ...(opts.group ? {} : { timeout: timeoutMs }) });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const both: Buffer[] = [];
      let timedOut = false;
      const timer = opts.group
        ? setTimeout(() => {
            timedOut = true;
            try {
              process.kill(-child.pid!, 'SIGKILL');
            } catch {
              // it ended as the timer fired
            }
          }, timeoutMs)
        : undefined;
      child.stdout.on('data', (b: Buffer) => (out.push(b), both.push(b)));
      child.stderr.on('data', (b: Buffer) => (err.push(b), both.push(b)));
      const why = (e: Error) => (as ? `setpriv (util-linux), which runs a command as another user, cannot run here: ${e.message}` : `${cmd}: ${e.message}`);
      child.on('error', (e) => (clearTimeout(timer), resolve({ code: 127, stdout: '', stderr: why(e) })));
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        const stdout = Buffer.concat(out).toString();
        const stderr = Buffer.concat(err).toString();
        resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr, output: Buffer.concat(both).toString(), ...(timedOut ? { timedOut: true } : {}) });
      });
      child.stdin.on('error', () => undefined); // a program that exits without reading its input is not an error
      child.stdin.end(opts.input ?? '');
    });
