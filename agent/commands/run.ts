/**
 * `mesh-host run [--once]`: the reconcile loop. Each pass is `reconcile` (see reconcile.ts);
 * between passes the loop sleeps the interval with jitter, so that a fleet started together
 * does not poll together. While the fleet cannot be reached it backs off exponentially (with
 * jitter, capped), and when the server says it is busy (HTTP 429/503 with Retry-After) it
 * never comes back sooner than asked. A pass that fails for bad input is reported, not retried faster.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { machineRefusal, MeshError, messageOf } from '../../core/errors.js';
import { EXIT, exitOf } from '../../core/exit.js';
import { openHost, type Host } from '../host.js';
import type { Logger } from '../log.js';
import { reconcile, type PassResult } from '../reconcile.js';
import type { HostContext } from '../resources/handler.js';
import { watchUpgrade } from '../upgrade/upgrade.js';

export interface RunOptions {
  once: boolean;
  intervalMs: number;
  heartbeatMs: number;
  /** Called after every pass (the CLI prints it). */
  onPass: (result: PassResult) => void;
  /** How long a newly installed version may take to complete a pass (MESH_HOST_PROBATION, see upgrade/upgrade.ts). */
  probationMs: number;
}

/**
 * How `run --once` exits after its pass (DESIGN.md's table): 1 when something checked is not as it
 * should be (a failed, untrusted or ineligible pass); else, when the fleet could not be reached or
 * the report not sent, by what the cause calls for (3 to try again later: unreachable, busy; 2 when
 * a person must act), or 1 for a cause nobody foresaw; 0 when the pass applied and the server has
 * its report.
 */
export function onceExit(pass: PassResult): number {
  if (['failed', 'untrusted', 'ineligible'].includes(pass.report.outcome)) return EXIT.failed;
  if (pass.sent && pass.disconnected === undefined) return EXIT.done;
  return pass.next ? exitOf(pass.next) : EXIT.failed;
}

/** The longest the loop ever waits between passes because of errors. */
export const MAX_BACKOFF_MS = 15 * 60_000;

/** Run passes until stopped (or one pass with `once`). Resolves with the last pass's result. */
export async function run(ctx: HostContext, log: Logger, opts: RunOptions, signal?: AbortSignal): Promise<PassResult | undefined> {
  let failures = 0;
  let last: PassResult | undefined;
  const upgrade = watchUpgrade(ctx, log, !opts.once, opts.probationMs);
  for (;;) {
    let host: Host | undefined;
    let retryAfterMs: number | null = null;
    try {
      upgrade.starting();
      host = await openHost(ctx, log);
      last = await reconcile(host, { heartbeatMs: opts.heartbeatMs });
      failures = last.disconnected ? failures + 1 : 0;
      opts.onPass(last);
      if (await upgrade.passed(last)) return last; // it installed a new version of itself: exit cleanly, the supervisor starts it (upgrade/upgrade.ts)
    } catch (e) {
      if (opts.once) throw e;
      failures += 1;
      const refused = machineRefusal(e);
      if (refused) upgrade.excuse(`this machine refused a write: the filesystem it was writing to ${refused}`);
      if (e instanceof MeshError && typeof e.data.retryAfterMs === 'number') retryAfterMs = e.data.retryAfterMs;
      log.error({ err: messageOf(e) }, 'reconcile pass failed');
    }
    if (opts.once || signal?.aborted) return last;
    retryAfterMs = host?.repo.retryAfterMs() ?? retryAfterMs;
    const wait = nextWait(opts.intervalMs, failures, retryAfterMs, Math.random);
    if (retryAfterMs !== null) log.warn({ retryAfterMs, waitMs: Math.round(wait) }, 'the fleet server asked us to wait');
    await sleep(wait, undefined, { signal }).catch(() => undefined);
    if (signal?.aborted) return last;
  }
}

/**
 * How long to sleep before the next pass. Healthy: the interval ±20 %. After `failures` passes
 * in a row that could not reach the fleet: the interval doubled per failure, capped at 10
 * intervals or MAX_BACKOFF_MS (whichever is less, never below one interval), plus up to 50 %
 * jitter so that hosts that failed together do not return together. Never shorter than the
 * server's Retry-After, which also gets up to 20 % on top.
 */
export function nextWait(intervalMs: number, failures: number, retryAfterMs: number | null, random: () => number): number {
  const cap = Math.max(intervalMs, Math.min(10 * intervalMs, MAX_BACKOFF_MS));
  const wait = failures === 0 ? intervalMs * (0.8 + 0.4 * random()) : Math.min(intervalMs * 2 ** (failures - 1), cap) * (1 + 0.5 * random());
  return retryAfterMs === null ? wait : Math.max(wait, retryAfterMs * (1 + 0.2 * random()));
}
