/**
 * Test-only fault injection, so the crash test can kill the host at exact points. With
 * MESH_FAULT="<point>:<n>" the host SIGKILLs itself the n-th time it passes <point>:
 *
 *   after-intent  an intent is durable in the store, before the change it announces
 *   after-change  a changed resource was read back and recorded as verified
 *   after-drop    a removal was recorded
 *   mid-write     half of a file's new content is written (and fsynced) to its temporary file
 *
 * Without the variable (always, outside tests) every call returns false and does nothing else.
 */
export type FaultPoint = 'after-intent' | 'after-change' | 'after-drop' | 'mid-write';

const spec = /^(after-intent|after-change|after-drop|mid-write):(\d+)$/.exec(process.env.MESH_FAULT ?? '');
let passes = 0;

/** True exactly when this is the n-th pass through `point` that MESH_FAULT names. */
export function faultDue(point: FaultPoint): boolean {
  if (!spec || spec[1] !== point) return false;
  passes += 1;
  return passes === Number(spec[2]);
}

/** Die at once, as `kill -9` would take the host: no exit handlers, no cleanup. */
export function crashNow(): never {
  process.kill(process.pid, 'SIGKILL');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10_000);
  throw new Error('SIGKILL did not stop the process');
}
