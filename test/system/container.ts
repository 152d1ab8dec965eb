/**
 * A real Debian machine for a test: a copy of the cached root (image.ts) booted by
 * `systemd-nspawn -b` with systemd as its PID 1. It shares this machine's network, so it reaches
 * a `mesh-cli serve` on 127.0.0.1; commands run inside it through `nsenter -t <its PID 1> -a`.
 * `stop()` powers it off and removes the copy; call it in a finally/afterAll, whatever happened.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Run } from '../helpers/fleet.js';
import { systemImage, type Release } from './image.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const INSIDE_ENV = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/root', 'LANG=C.UTF-8'];

export interface Container {
  /** The machine's root folder as seen from here: write a file under it to put it in the machine. */
  root: string;
  /** The container's PID 1 (systemd) as seen from here. */
  pid: number;
  /** Run a program inside, with a clean environment; never throws on a non-zero exit. */
  exec(cmd: string, args?: string[], env?: Record<string, string>): Promise<Run>;
  /** Run a program inside and return its stdout; throws with its output when it fails. */
  must(cmd: string, ...args: string[]): Promise<string>;
  /** Everything the container wrote to its console so far (the boot messages). */
  console(): string;
  /**
   * Cut the machine's power in the middle of whatever it does (`systemctl reboot --force --force`:
   * no unit is stopped, nothing is synced by a shutdown) and boot the same root again; resolves
   * when its systemd is up again.
   */
  powerCut(): Promise<void>;
  /** Power the machine off (SIGKILL after 30 s) and remove its root. */
  stop(): Promise<void>;
}

/** Tools the system tests need on this machine, and why they cannot run without them; undefined when all is there. */
export async function missingTools(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'they need root (systemd-nspawn, debootstrap)';
  const inside = insideContainer();
  if (inside) return `this machine is itself a container (${inside}): the system tests boot their own Debian machine, which does not nest; run them on the host`;
  const tools = ['debootstrap', 'systemd-nspawn', 'dpkg-repack', 'nsenter', 'setpriv'];
  const missing = tools.filter((t) => !['/usr/sbin', '/usr/bin', '/sbin', '/bin'].some((d) => existsSync(join(d, t))));
  return missing.length ? `missing ${missing.join(', ')} (run scripts/install-deps.sh)` : undefined;
}

/**
 * The container manager this process runs under when it is a systemd container (systemd-nspawn,
 * podman and the like write /run/systemd/container), or undefined. Not docker's /.dockerenv: a
 * privileged docker container runs systemd-nspawn well enough, and CI machines may be such.
 */
function insideContainer(): string | undefined {
  try {
    return readFileSync('/run/systemd/container', 'utf8').trim() || 'container';
  } catch {
    return undefined;
  }
}

/** Boot a copy of the `release` root in `dir` (which the caller removes) and wait until its systemd is up. */
export async function boot(dir: string, release: Release = 'bookworm', log: (line: string) => void = console.log): Promise<Container> {
  const image = await systemImage(release, log);
  const root = join(dir, 'root');
  await run('cp', ['--reflink=auto', '-a', image, root]);
  const container = machine(root, log);
  try {
    await container.start();
    return container;
  } catch (e) {
    await container.stop();
    throw e;
  }
}

interface Booted { nspawn: ChildProcess; exited: Promise<void> }

function machine(root: string, log: (line: string) => void): Container & { start(): Promise<void> } {
  const output: string[] = [];
  let now: Booted | undefined;
  const running = () => now !== undefined && now.nspawn.exitCode === null && now.nspawn.signalCode === null;
  const c = {
    root,
    pid: 0,
    exec: (cmd: string, args: string[] = [], env: Record<string, string> = {}) =>
      new Promise<Run>((resolve) => {
        const vars = [...INSIDE_ENV, ...Object.entries(env).map(([k, v]) => `${k}=${v}`)];
        execFile('nsenter', ['-t', String(c.pid), '-a', '--', 'env', '-i', ...vars, cmd, ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
        });
      }),
    async must(cmd: string, ...args: string[]) {
      const r = await c.exec(cmd, args);
      if (r.code !== 0) throw new Error(`in the container: ${cmd} ${args.join(' ')} exited ${r.code}\n${r.stdout}${r.stderr}`);
      return r.stdout;
    },
    console: () => output.join(''),
    /** Boot the root: nspawn, then wait for its systemd. */
    async start() {
      // A unique machine name: nspawn keeps per-name state under /run/systemd/nspawn. setpriv
      // --pdeathsig: if this test process dies, nspawn gets SIGTERM and shuts the machine down.
      const name = `mesh-${process.pid}-${Date.now().toString(36)}`;
      const nspawn = spawn('setpriv', ['--pdeathsig', 'TERM', 'systemd-nspawn', '--quiet', '--keep-unit', '--register=no', `--machine=${name}`, '-D', root, '-b'], { stdio: ['ignore', 'pipe', 'pipe'] });
      for (const s of [nspawn.stdout!, nspawn.stderr!]) s.on('data', (d: Buffer) => output.push(d.toString()));
      now = { nspawn, exited: new Promise<void>((resolve) => nspawn.once('exit', () => resolve())) };
      c.pid = await initPid(nspawn, output);
      await waitForBoot(c, log);
    },
    async powerCut() {
      const { exited } = now!;
      // The nsenter'd systemctl dies with the machine: its result says nothing.
      await c.exec('systemctl', ['reboot', '--force', '--force']);
      const down = await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]);
      if (!down) throw new Error(`the container did not go down within 30 s of systemctl reboot -ff:\n${c.console().slice(-3000)}`);
      await c.start();
    },
    async stop() {
      if (now && running()) {
        const { nspawn, exited } = now;
        nspawn.kill('SIGTERM'); // nspawn asks the container's systemd for an orderly shutdown
        const done = await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]);
        if (!done) {
          try {
            if (c.pid) process.kill(c.pid, 'SIGKILL');
          } catch {} // already gone
          nspawn.kill('SIGKILL');
          await exited;
        }
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
  return c;
}

/** nspawn's child is the container's PID 1: wait for it to be systemd. */
async function initPid(nspawn: ChildProcess, output: string[]): Promise<number> {
  for (const until = Date.now() + 30_000; Date.now() < until; await sleep(100)) {
    if (nspawn.exitCode !== null || nspawn.signalCode !== null) break;
    const children = readFileSync(`/proc/${nspawn.pid}/task/${nspawn.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    for (const child of children) {
      const exe = (() => { try { return readFileSync(`/proc/${child}/comm`, 'utf8').trim(); } catch { return ''; } })();
      if (exe === 'systemd') return Number(child);
    }
  }
  throw new Error(`systemd-nspawn did not start the container's systemd (exit ${nspawn.exitCode ?? nspawn.signalCode ?? 'none yet'}):\n${output.join('').slice(-3000)}`);
}

/** Wait for `systemctl is-system-running --wait`: running, or degraded with its failed units printed. */
async function waitForBoot(c: Container, log: (line: string) => void): Promise<void> {
  let last = '';
  for (const until = Date.now() + 90_000; Date.now() < until; await sleep(200)) {
    const r = await c.exec('systemctl', ['is-system-running', '--wait']);
    last = (r.stdout + r.stderr).trim();
    if (last === 'running') return;
    if (last === 'degraded') {
      log(`the container booted degraded; failed units:\n${(await c.exec('systemctl', ['--failed', '--no-legend', '--plain'])).stdout}`);
      return;
    }
  }
  throw new Error(`the container's systemd did not finish booting within 90 s (is-system-running: ${last}):\n${c.console().slice(-3000)}`);
}
