/**
 * One host process per root. The lock is a file, <root>/var/lib/mesh-host/lock, holding the
 * holder's pid and its start time (from /proc/<pid>/stat, so a reused pid is not mistaken for
 * the holder). It is created whole with link(2), which fails if the file exists. A lock whose
 * holder is gone is stale and is taken over; takeovers are serialised by a second file created
 * with O_EXCL (lock.takeover), so two processes that both find the same stale lock cannot both
 * win. The lock is held for the life of the process and released when it exits, also on
 * SIGINT/SIGTERM and on a thrown error; a SIGKILLed holder leaves a stale lock, never a wedge.
 */
import { linkSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { MeshError } from '../core/errors.js';
import type { HostPaths } from './paths.js';

interface Holder {
  pid: number;
  start: string;
}

const held = new Map<string, () => void>();

/**
 * Hold the lock on `paths.root` until this process exits or calls the function returned (a
 * no-op when the lock was already held here); fails at once if another live host holds it.
 */
export function acquireLock(paths: HostPaths): () => void {
  if (held.has(paths.lock)) return () => {};
  mkdirSync(dirname(paths.lock), { recursive: true });
  const me: Holder = { pid: process.pid, start: startTime(process.pid) ?? '?' };
  const tmp = `${paths.lock}.${process.pid}.tmp`;
  const release = () => {
    held.delete(paths.lock);
    const holder = readHolder(paths.lock);
    if (holder?.pid === me.pid && holder.start === me.start) rmQuiet(paths.lock);
  };
  // Hooked before the lock exists: a SIGTERM that comes as soon as it does is handled (after this
  // function returns) and releases it, where with no listener yet it would kill at once and leave
  // it behind. Released before it is ours, it removes nothing: release checks the holder.
  held.set(paths.lock, release);
  hookExit();
  try {
    writeFileSync(tmp, `${me.pid} ${me.start}\n`); // inside: a write that fails (a full disk) leaves no empty tmp behind
    for (let attempt = 0; ; attempt++) {
      if (tryLink(tmp, paths.lock)) break;
      const holder = readHolder(paths.lock);
      if (holder && alive(holder)) throw locked(holder, paths);
      if (attempt >= 20) throw new MeshError('E_LOCKED', `cannot take the lock ${paths.lock} on ${paths.root}: it keeps changing hands; try again`, { next: 'retry' });
      breakStale(paths.lock, holder);
    }
  } catch (e) {
    held.delete(paths.lock);
    throw e;
  } finally {
    rmQuiet(tmp);
  }
  return release;
}

/** Remove a stale lock, but only the one judged stale, and only one process at a time. */
function breakStale(lock: string, stale: Holder | null): void {
  const gate = `${lock}.takeover`;
  const gateTmp = `${gate}.${process.pid}.tmp`;
  writeFileSync(gateTmp, `${process.pid} ${startTime(process.pid) ?? '?'}\n`);
  try {
    if (!tryLink(gateTmp, gate)) {
      const breaker = readHolder(gate);
      if (breaker && alive(breaker)) return sleepMs(10); // another process is taking over; look again after it
      // Its breaker died inside the gate: clear the gate (moved aside first, so only one process clears it).
      try {
        renameSync(gate, `${gate}.${process.pid}.dead`);
      } catch {
        return;
      }
      return rmQuiet(`${gate}.${process.pid}.dead`);
    }
    const now = readHolder(lock);
    if (now === null ? stale === null : stale !== null && now.pid === stale.pid && now.start === stale.start) rmQuiet(lock);
    rmQuiet(gate);
  } finally {
    rmQuiet(gateTmp);
  }
}

function locked(holder: Holder, paths: HostPaths): MeshError {
  return new MeshError('E_LOCKED', `another mesh-host (pid ${holder.pid}) is working on ${paths.root}; wait for it to finish, or stop it`, {
    next: 'retry',
    data: { pid: holder.pid, lock: paths.lock },
  });
}

function tryLink(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
}

/** The holder named in a lock file; null when it is gone or unreadable (a lock is always written whole, so garbage is stale). */
function readHolder(path: string): Holder | null {
  try {
    const m = /^(\d+) (\S+)\n$/.exec(readFileSync(path, 'utf8'));
    return m ? { pid: Number(m[1]), start: m[2]! } : null;
  } catch {
    return null;
  }
}

function alive(h: Holder): boolean {
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const start = startTime(h.pid);
  return start === null || h.start === '?' || start === h.start;
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null without /proc. */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  const releaseAll = () => [...held.values()].forEach((release) => release());
  process.on('exit', releaseAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    // First in line, so that it sees every other listener: when someone else handles the
    // signal (the run loop stops gracefully and exits), exit releases the lock; else die now.
    process.prependListener(sig, function onSignal() {
      if (process.listenerCount(sig) > 1) return;
      releaseAll();
      process.removeListener(sig, onSignal);
      process.kill(process.pid, sig);
    });
  }
}

function rmQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
