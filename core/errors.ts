/**
 * Errors are data. Every error mesh raises on purpose is a MeshError: a stable `code`,
 * structured `data`, a message a person can act on, and a `next` group that decides what
 * happens after it (fluxcd/source-controller's error groups):
 *
 * - `retry`: a passing fault (server down, timeout); the loop backs off and tries again.
 * - `wait`:  nothing is wrong yet (no declaration for this node, token not on main yet).
 * - `human`: bad input or a state the host refuses to guess about; a person must act.
 *
 * Anything that is not a MeshError is a bug and is shown with its stack.
 */
export type NextStep = 'retry' | 'wait' | 'human';

export interface Problem {
  file: string;
  line: number;
  col: number;
  message: string;
}

export class MeshError extends Error {
  readonly code: string;
  readonly next: NextStep;
  readonly data: Record<string, unknown>;

  constructor(code: string, message: string, opts: { next?: NextStep; data?: Record<string, unknown>; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'MeshError';
    this.code = code;
    this.next = opts.next ?? 'human';
    this.data = opts.data ?? {};
  }
}

/** A declaration, config, token or report that failed validation: every problem, each with its place. */
export class InvalidInputError extends MeshError {
  readonly problems: Problem[];

  /** `todo`: what a person does about it, said after the problems, where the problems alone do not say. */
  constructor(what: string, problems: Problem[], todo?: string) {
    super('E_INVALID', `${what} is invalid:\n${problems.map(formatProblem).join('\n')}${todo ? `\n${todo}` : ''}`, {
      next: 'human',
      data: { problems },
    });
    this.problems = problems;
  }
}

export function formatProblem(p: Problem): string {
  return `  ${placed(p)}`;
}

/** "file:line:col: message", or the message alone for a problem that has no place in a file. */
export function placed(p: { file?: string; line?: number; col?: number; message: string }): string {
  return p.file ? `${p.file}:${p.line}:${p.col}: ${p.message}` : p.message;
}

export function isMeshError(e: unknown): e is MeshError {
  return e instanceof MeshError;
}

/** Why the machine refused a write (`e`: its filesystem full, over quota or read-only), or null for any other error. */
export function machineRefusal(e: unknown): 'is full' | 'is over its disk quota' | 'is read-only' | null {
  const code = (e as { code?: unknown } | null)?.code;
  return code === 'ENOSPC' ? 'is full' : code === 'EDQUOT' ? 'is over its disk quota' : code === 'EROFS' ? 'is read-only' : null;
}

/** The message of any thrown value, without a stack. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
