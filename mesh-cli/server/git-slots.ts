/**
 * How many git processes `mesh-cli serve` runs at once for the nodes, and how many of their
 * requests may wait for one: beyond that a node is told to come back later (HTTP 429 with
 * Retry-After), which mesh-host honours (agent/fleet/http.ts), so that a burst of hosts (a fleet
 * started together, a change of main) queues instead of thrashing the server with hundreds of
 * git processes. As Puppet Server's max-active-instances and max-queued-requests do.
 *
 * Requests answered in-process (a poll of main, a report push, a cached fetch) take no slot, and
 * an operator's never waits here: one person's fetch or push is not what makes a burst.
 */

/** A slot's release; call it once, when the git process is done. */
export type Release = () => void;

export interface GitSlots {
  /**
   * A slot when one is free or frees up while waiting; null when the queue is full (answer 429).
   * When `gone` aborts while the request waits (its client hung up), it leaves the queue at once and
   * gets a release that frees nothing: it no longer holds a place that a live request could take.
   */
  enter(gone?: AbortSignal): Promise<Release | null>;
  /** Seconds to tell a refused request to wait: the queue's length in runs of the recent mean duration, 1–120. */
  retryAfter(): number;
  /** Git processes running and requests waiting (for tests and the log). */
  readonly load: { running: number; waiting: number };
}

/** The guess for a git run's length before one has finished: a host's fetch of a step of main takes ~0.1 s here. */
const FIRST_GUESS_S = 0.25;

/** Slots for `processes` git processes at once, with at most `queue` requests waiting. */
export function gitSlots({ processes, queue }: { processes: number; queue: number }): GitSlots {
  let running = 0;
  const waiting: Array<(release: Release) => void> = [];
  /** Mean seconds of a git run, recent runs weighing most; null until one has finished. */
  let mean: number | null = null;
  /** When each running run started. */
  const starts = new Set<{ at: number }>();
  const slot = (): Release => {
    running++;
    const start = { at: performance.now() };
    starts.add(start);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      starts.delete(start);
      const seconds = (performance.now() - start.at) / 1000;
      mean = mean === null ? seconds : 0.8 * mean + 0.2 * seconds;
      running--;
      const next = waiting.shift();
      if (next) next(slot());
    };
  };
  /**
   * A run's expected length. Before any has finished (a burst's first refusals), the oldest run in
   * flight says how long runs take at least, and a short guess stands for the rest: a guess too short
   * costs a refused host one more 429, answered in-process; one too long (it was 1 s) kept the first
   * hosts refused in a burst away for up to 120 s after the queue had drained.
   */
  const expected = (): number => {
    if (mean !== null) return mean;
    let oldest = performance.now();
    for (const start of starts) oldest = Math.min(oldest, start.at);
    return Math.max(FIRST_GUESS_S, (performance.now() - oldest) / 1000);
  };
  return {
    enter(gone) {
      if (running < processes) return Promise.resolve(slot());
      if (waiting.length >= queue) return Promise.resolve(null);
      return new Promise((resolve) => {
        const leave = () => {
          const at = waiting.indexOf(granted);
          if (at >= 0) waiting.splice(at, 1);
          resolve(() => {});
        };
        const granted = (release: Release) => {
          gone?.removeEventListener('abort', leave);
          resolve(release);
        };
        waiting.push(granted);
        gone?.addEventListener('abort', leave, { once: true });
      });
    },
    retryAfter: () => Math.min(120, Math.max(1, Math.ceil((expected() * (waiting.length + processes)) / processes))),
    get load() {
      return { running, waiting: waiting.length };
    },
  };
}
