/**
 * A sign of life during a long pass: after the first second, one line per second or per tenth of
 * the steps done, whichever comes first ("applying: 300/3000 (10 %), file:/etc/x"). main.ts hands
 * it in only when stderr is a terminal; a service's journal and a pipe get the final summary only.
 */

/** Told after each step of a pass: how many of how many are done, and the last one's id. */
export type Progress = (done: number, total: number, id: string) => void;

/** A Progress that writes its lines with `write`, reading the time from `now` (ms), once the pass has run `afterMs`. */
export function progressLines(write: (line: string) => void, now: () => number = Date.now, afterMs = 1000): Progress {
  let start: number | null = null;
  let lastAt = 0;
  let lastTenth = 0;
  return (done, total, id) => {
    const t = now();
    if (start === null || done === 1) {
      start = t;
      lastAt = t;
      lastTenth = 0;
    }
    if (t - start < afterMs || done === total) return;
    const tenth = Math.floor((done * 10) / total);
    if (t - lastAt < 1000 && tenth === lastTenth) return;
    lastAt = t;
    lastTenth = tenth;
    write(`applying: ${done}/${total} (${Math.floor((done * 100) / total)} %), ${id}`);
  };
}
