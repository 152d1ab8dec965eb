// Measuring one whole process: wall time from spawn to exit (measured here), and peak RSS and
// CPU time as the kernel counts them for the child (wait4 rusage, read through GNU time's
// -f/-o). Without /usr/bin/time, peak RSS is polled from /proc/<pid>/status (VmHWM) instead.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const TIME = '/usr/bin/time';

/**
 * The environment every measured process gets: what systemd gives mesh-host.service (and what a
 * cron or systemd job gives cf-agent), not this shell's. A shell may carry variables that change
 * what a program does at start: NODE_EXTRA_CA_CERTS (set on this workplace's machines) makes
 * every node process parse a CA bundle first, ~45 ms here, which no host under its unit pays.
 */
export const UNIT_ENV = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...(process.env.LANG ? { LANG: process.env.LANG } : {}) };

const HAS_TIME = existsSync(TIME);

/** Run `cmd args` to completion in UNIT_ENV and `env`; resolves { wallMs, rssMb, cpuMs, code, stdout, stderr }. */
export function measure(cmd, args, env = {}) {
  const out = join(tmpdir(), `mesh-bench-time-${process.pid}.txt`);
  const argv = HAS_TIME ? [TIME, '-f', '%M %U %S', '-o', out, cmd, ...args] : [cmd, ...args];
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const proc = spawn(argv[0], argv.slice(1), { env: { ...UNIT_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let hwmKb = 0;
    proc.stdout.on('data', (b) => (stdout += b));
    proc.stderr.on('data', (b) => (stderr += b));
    const poll = HAS_TIME ? null : setInterval(() => (hwmKb = Math.max(hwmKb, vmHwmKb(proc.pid))), 2);
    proc.on('error', reject);
    proc.on('close', (code) => {
      const wallMs = Number(process.hrtime.bigint() - start) / 1e6;
      if (poll) clearInterval(poll);
      let rssMb = hwmKb / 1024;
      let cpuMs = NaN;
      if (HAS_TIME) {
        const [kb, user, sys] = readFileSync(out, 'utf8').trim().split('\n').pop().split(' ').map(Number);
        rmSync(out, { force: true });
        rssMb = kb / 1024;
        cpuMs = (user + sys) * 1000;
      }
      resolve({ wallMs, rssMb, cpuMs, code, stdout, stderr });
    });
  });
}

function vmHwmKb(pid) {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The median of `values`. */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
