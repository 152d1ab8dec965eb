/**
 * `mesh-host run [--once]`: the reconcile loop. Each pass is `reconcile` (see reconcile.ts);
 * between passes the loop sleeps the interval with jitter, backing off exponentially while
 * the fleet cannot be reached. A pass that fails for bad input is reported, not retried faster.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { messageOf } from '../errors.js';
import { openHost } from '../host.js';
import type { Logger } from '../log.js';
import { reconcile, type PassResult } from '../reconcile.js';
import type { ResourceContext } from '../resources/handler.js';

export interface RunOptions {
  once: boolean;
  intervalMs: number;
  heartbeatMs: number;
  /** Called after every pass (the CLI prints it). */
  onPass: (result: PassResult) => void;
}

/** Run passes until stopped (or one pass with `once`). Resolves with the last pass's result. */
export async function run(ctx: ResourceContext, log: Logger, opts: RunOptions, signal?: AbortSignal): Promise<PassResult | undefined> {
  let failures = 0;
  let last: PassResult | undefined;
  for (;;) {
    try {
      const host = await openHost(ctx, log);
      last = await reconcile(host, { heartbeatMs: opts.heartbeatMs });
      failures = last.disconnected ? failures + 1 : 0;
      opts.onPass(last);
    } catch (e) {
      if (opts.once) throw e;
      failures += 1;
      log.error({ err: messageOf(e) }, 'reconcile pass failed');
    }
    if (opts.once || signal?.aborted) return last;
    const backoff = Math.min(opts.intervalMs * 2 ** Math.max(0, failures - 1), 10 * opts.intervalMs, 15 * 60_000);
    const jitter = 0.9 + Math.random() * 0.2;
    await sleep(Math.max(backoff, opts.intervalMs) * jitter, undefined, { signal }).catch(() => undefined);
    if (signal?.aborted) return last;
  }
}
