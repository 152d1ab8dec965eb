/**
 * The seam every resource type implements. A handler never decides success by itself:
 * the engine reads the resource back after `apply` and compares it with `diff`.
 */
import type { Resource } from '../../schema/declaration.js';
import type { OwnedRecord } from '../../schema/report.js';
import type { Observed } from '../../core/plan.js';

export type { Observed };

/** What a handler gets from the world: the machine's root, a process runner and a clock. */
export interface ResourceContext {
  root: string;
  exec: Exec;
  now: () => Date;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program (no shell) and resolves with its exit code and output; never throws on a non-zero exit. */
export type Exec = (cmd: string, args: string[], opts?: { env?: Record<string, string>; input?: string; timeoutMs?: number }) => Promise<ExecResult>;

/** What was there before the host took a resource over, so that un-declaring can restore it. */
export type Prior = Record<string, unknown>;

export interface Handler<R extends Resource = Resource> {
  /** Read the current state of `r` on the machine. */
  read(r: R, ctx: ResourceContext): Promise<Observed>;
  /** What differs between `r` and `observed`, one short phrase each; empty when in sync. Pure. */
  diff(r: R, observed: Observed): string[];
  /** Change the machine so that `r` holds. */
  apply(r: R, observed: Observed, ctx: ResourceContext): Promise<void>;
  /** Capture what is there before the host first changes it. */
  prior(r: R, observed: Observed, ctx: ResourceContext): Promise<Prior>;
  /** Undo an owned resource that is no longer declared: restore its prior state or delete it. Returns a note for the report. */
  remove(record: OwnedRecord, ctx: ResourceContext): Promise<string | undefined>;
}
