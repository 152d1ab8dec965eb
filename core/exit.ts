/**
 * How both programs end: the one exit table of DESIGN.md ("Commands"), and the one function
 * that turns whatever reached the top-level catch into a message and an exit code.
 *
 * A MeshError exits by its `next`: `human` 2 (a person must act), `retry` 3 (try again later),
 * `wait` 4 ("not there yet": what it needs, such as the fleet's main branch, does not exist
 * yet; running again once it does will work). A commander usage error exits 2 (commander has
 * already printed it); its help and version exit 0. A full filesystem exits 3, a read-only one 2.
 * Anything else is a bug: 70, with its stack.
 * Code 1 (something checked is not as it should be) is a result, set by the command itself,
 * never a thrown error; 69 is the host's probation exit, set by the upgrade path alone.
 */
import type { Command } from 'commander';
import { machineRefusal, MeshError, messageOf, type NextStep } from './errors.js';

export const EXIT = {
  done: 0,
  failed: 1,
  human: 2,
  retry: 3,
  notYet: 4,
  probation: 69,
  bug: 70,
} as const;

const BY_NEXT: Record<NextStep, number> = { human: EXIT.human, retry: EXIT.retry, wait: EXIT.notYet };

export interface Ending {
  code: number;
  /** What to write to stderr (several lines for a bug: message, then stack); empty when it was already written. */
  message: string;
}

/** The code for a step a person or a script must take next (a MeshError's `next`). */
export function exitOf(next: NextStep): number {
  return BY_NEXT[next];
}

/** The exit code and stderr text for `e`, thrown out of `program` (`mesh-cli`, `mesh-host`). */
export function ending(program: string, e: unknown): Ending {
  if (e instanceof MeshError) return { code: exitOf(e.next), message: `${program}: ${e.message}` };
  if (isCommanderError(e)) return { code: e.exitCode === 0 ? EXIT.done : EXIT.human, message: '' };
  const machine = machineEnding(program, e);
  if (machine) return machine;
  const stack = e instanceof Error && e.stack ? `\n${e.stack}` : '';
  return { code: EXIT.bug, message: `${program}: internal error (a bug; please report it): ${messageOf(e)}${stack}` };
}

/**
 * A write the machine refused, which is no bug of ours: a full filesystem (try again once there is
 * space) or a read-only one (a person must act). The host's writes are crash-safe, so its run
 * stopped here is one stopped at any other point. Null for any other error.
 */
function machineEnding(program: string, e: unknown): Ending | null {
  if (!(e instanceof Error)) return null;
  const refused = machineRefusal(e);
  if (refused === null) return null;
  const path = (e as { path?: unknown }).path;
  const where = typeof path === 'string' ? ` (${path})` : '';
  if (refused === 'is read-only') return { code: EXIT.human, message: `${program}: the filesystem it was writing to is read-only${where}: ${e.message}. Make it writable, then run it again` };
  return { code: EXIT.retry, message: `${program}: the filesystem it was writing to is full${where}: ${e.message}. Free space there ('df' shows which filesystem is full), then run it again` };
}

/**
 * A commander error (usage, help, version), known by the code commander gives each: mesh-host
 * loads commander only for a command line it does not read itself (agent/quick-args.ts), so
 * this module must not load it to test a class.
 */
function isCommanderError(e: unknown): e is Error & { exitCode: number } {
  const { code, exitCode } = (e ?? {}) as { code?: unknown; exitCode?: unknown };
  return e instanceof Error && typeof code === 'string' && code.startsWith('commander.') && typeof exitCode === 'number';
}

/** The top-level catch of a `main.ts`: write the message and set the exit code. */
export function exitWith(program: string, e: unknown): void {
  const { code, message } = ending(program, e);
  if (message) console.error(message);
  process.exitCode = code;
}

/** Make `program` and every subcommand throw their usage errors (and help, version) instead of exiting, so they reach `ending`. */
export function throwUsageErrors(program: Command): Command {
  program.exitOverride();
  for (const sub of program.commands) throwUsageErrors(sub);
  return program;
}
