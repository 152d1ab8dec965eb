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
  /** A slot when one is free or frees up while waiting; null when the queue is full (answer 429). */
  enter(): Promise<Release | null>;
  /** Seconds to tell a refused request to wait: the queue's length in runs of the recent mean duration, 1–120. */
  retryAfter(): number;
  /** Git processes running and requests waiting (for tests and the log). */
  readonly load: { running: number; waiting: number };
}

/** Slots for `processes` git processes at once, with at most `queue` requests waiting. */
export function gitSlots({ processes, queue }: { processes: number; queue: number }): GitSlots {
  let running = 0;
  const waiting: Array<(release: Release) => void> = [];
  /** Mean seconds of a git run, recent runs weighing most; 1 s until one is seen. */
  let mean = 1;
  const slot = (): Release => {
    running++;
    const started = performance.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      mean = 0.8 * mean + 0.2 * ((performance.now() - started) / 1000);
      running--;
      const next = waiting.shift();
      if (next) next(slot());
    };
  };
  return {
    enter() {
      if (running < processes) return Promise.resolve(slot());
      if (waiting.length >= queue) return Promise.resolve(null);
      return new Promise((resolve) => waiting.push(resolve));
    },
    retryAfter: () => Math.min(120, Math.max(1, Math.ceil((mean * (waiting.length + processes)) / processes))),
    get load() {
      return { running, waiting: waiting.length };
    },
  };
}
