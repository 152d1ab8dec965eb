// Measuring one whole process: wall time from spawn to exit (measured here), and peak RSS and
// CPU time as the kernel counts them for the child (wait4 rusage, read through GNU time's
// -f/-o). Without /usr/bin/time, peak RSS is polled from /proc/<pid>/status (VmHWM) instead.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
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

/**
 * Before measuring in `dir`: let the files deleted before the bench stop slowing the files it
 * makes. ext4 without a journal (this machine's disk: `/sys/fs/ext4/<dev>/journal_task` says
 * `<none>`) does not reuse an inode for 60 s after its deletion, 360 s while its inode table
 * block is unwritten, and making a file walks past every such inode of its block group
 * (fs/ext4/ialloc.c, `recently_deleted`). Right after a test suite or an earlier bench has
 * deleted thousands of files, a new file costs ~0.3 ms instead of ~0.02 ms, so a figure that
 * makes files (a first apply, a repair by atomic replacement) measured what ran before it. On
 * such a filesystem: write it out (the inode tables with it) and wait those 60 s.
 * BENCH_SETTLE=SECONDS changes the wait; 0 skips it. Returns what was done, for the results.
 */
export async function settleDeletes(dir) {
  if (!journalLessExt4(dir)) return { journalLessExt4: false, settledSeconds: 0 };
  const seconds = Number(process.env.BENCH_SETTLE ?? 61);
  if (seconds > 0) {
    console.log(`${dir} is on ext4 without a journal, where files deleted in the last minutes slow every file made: writing it out and waiting ${seconds} s before measuring (BENCH_SETTLE=0 skips the wait)`);
    execFileSync('sync', ['-f', dir]);
    await new Promise((done) => setTimeout(done, seconds * 1000));
  }
  return { journalLessExt4: true, settledSeconds: Math.max(0, seconds) };
}

/** Whether `dir` is on an ext4 filesystem mounted without a journal. */
function journalLessExt4(dir) {
  const dev = statSync(dir, { bigint: true }).dev;
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  try {
    const name = readlinkSync(`/sys/dev/block/${major}:${minor}`).split('/').pop();
    return readFileSync(`/sys/fs/ext4/${name}/journal_task`, 'utf8').trim() === '<none>';
  } catch {
    return false; // not a block device's filesystem, or not ext4
  }
}

/** The median of `values`. */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
