/**
 * Test-only fault injection, so the crash test can kill the host at exact points. With
 * MESH_FAULT="<point>:<n>" (read by main.ts) the host SIGKILLs itself the n-th time it passes <point>:
 *
 *   after-intent  an intent is durable in the store, before the change it announces
 *   after-change  a changed resource was read back and recorded as verified
 *   after-drop    a removal was recorded
 *   mid-write     half of a file's new content is written (and fsynced) to its temporary file
 *   staged        a file of a batch is written to its temporary name (the batch is not synced yet)
 *   renamed       a file of a batch was renamed into place (the batch's data is durable)
 *   before-save   a pass is done, before the store is written
 *   before-run    a command is about to run (its trigger, if any, is pending in the store)
 *
 * Without the variable (always, outside tests) `due` returns false and does nothing else.
 */
export type FaultPoint = 'after-intent' | 'after-change' | 'after-drop' | 'mid-write' | 'staged' | 'renamed' | 'before-save' | 'before-run';

export interface Faults {
  /** True exactly when this is the n-th pass through `point` that the spec names. */
  due(point: FaultPoint): boolean;
}

/** No faults: production, and every caller that is not handed any. */
export const noFaults: Faults = { due: () => false };

/** The faults `spec` ("<point>:<n>", MESH_FAULT) asks for; anything else asks for none. */
export function faultsFrom(spec: string | undefined): Faults {
  const m = /^(after-intent|after-change|after-drop|mid-write|staged|renamed|before-save|before-run):(\d+)$/.exec(spec ?? '');
  if (!m) return noFaults;
  let passes = 0;
  return {
    due(point) {
      if (m[1] !== point) return false;
      passes += 1;
      return passes === Number(m[2]);
    },
  };
}

/** Die at once, as `kill -9` would take the host: no exit handlers, no cleanup. */
export function crashNow(): never {
  process.kill(process.pid, 'SIGKILL');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10_000);
  throw new Error('SIGKILL did not stop the process');
}
