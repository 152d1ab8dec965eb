/**
 * The seam every resource type implements. A handler never decides success by itself:
 * the engine reads the resource back after `apply` and compares it with `diff`. Beyond the
 * five required parts, a handler may say what it needs first, hook into its own changes, and
 * say what cannot be verified here: the engine (apply.ts) uses each part when it is there and
 * knows no resource type by name.
 */
import { WriteBatch } from '../atomic.js';
import type { Progress } from '../progress.js';
import type { Resource, PackageResource } from '../../schema/declaration.js';
import type { OwnedRecord, ResourceResult } from '../../schema/report.js';
import type { Observed } from '../../core/plan.js';
import type { ParseDeclaration } from '../../core/declaration/declaration.js';
import type { Faults } from '../fault.js';
import type { StoreChecks } from '../store/checks.js';
import type { HostConfig } from '../config.js';
import type { HostPaths } from '../paths.js';
import type { HostSecrets } from '../secrets/host.js';

export type { Observed };

/**
 * What the host is given once, by main.ts (the composition root): the machine's root, a
 * process runner, a clock, the faults a test asked for, loaders for the code that a
 * process should compile only when it needs it, and where a long pass shows that it is alive.
 */
export interface HostContext {
  root: string;
  exec: Exec;
  now: () => Date;
  faults: Faults;
  load: Loaders;
  /** Told after each step of a pass (a terminal shows it; progress.ts). */
  progress?: Progress;
  /**
   * What a pass is doing, as a log line at level debug (main.ts gives it only at that level: at any
   * other, `ctx.debug?.(…)` builds nothing). Its fields are what the report says anyway: ids,
   * actions, the changes as the summary words them, counts and milliseconds, never a value.
   */
  debug?: Debug;
}

/** A log line at level debug: its fields, then its message. */
export type Debug = (fields: Record<string, unknown>, msg: string) => void;

/** Code compiled only when it is needed (start-up cost): main.ts hands in real imports; tests may hand in static ones. */
export interface Loaders {
  /** The declaration parser: the YAML parser and the schemas, not needed when a cached declaration answers. */
  parser(): Promise<ParseDeclaration>;
  /** The store's schemas, needed only when a store is not exactly as this host last wrote it. */
  storeChecks(): Promise<StoreChecks>;
  /** The config reader and its schemas, needed by `apply --bundle` only on an enrolled machine. */
  readConfig(): Promise<(paths: HostPaths) => HostConfig | null>;
  /** The host's self-upgrade hooks (upgrade/upgrade.ts), needed only when a pass changes the host's own package. */
  hostUpgrade(): Promise<HostUpgrade>;
  /** The node's secrets (secrets/host.ts: its age identity, decrypting), needed only by a pass whose declaration reads a secret or a host without an identity yet. */
  secrets?(): Promise<HostSecrets>;
}

/** What a handler gets for one pass: the host's context, this pass's caches, and what its hooks need to know. */
export interface ResourceContext extends HostContext {
  pass: PassCache;
  /** The host's own Debian package (config `hostPackage`, default mesh-host): its changes are upgrades of the host. */
  hostPackage: string;
  /** Secret values this node holds: a command's output is masked for each before it goes anywhere. */
  masks?: string[];
}

/**
 * What a pass has learnt about the machine and may reuse until it ends: the folders seen to be
 * real directories (node.ts), the user and group tables read (ownership.ts), the files written
 * to their temporary names and not yet renamed into place (`writes`, committed by the engine,
 * see `staged`), and the folders whose renames are made durable once at the end of the pass (atomic.ts).
 */
export interface PassCache {
  realDirs: Set<string>;
  realChains: Set<string>;
  idTables: Map<string, unknown>;
  writes: WriteBatch;
  dirsToSync: Set<string>;
  /** The paths the pass's declaration names (apply.ts observe): what a purged directory keeps. */
  declared: Set<string>;
  /** The units this pass started (service.ts): a change they watch does not restart or reload them as well. */
  started: Set<string>;
}

/** The caches of a new pass: empty. */
export function newPass(): PassCache {
  return { realDirs: new Set(), realChains: new Set(), idTables: new Map(), writes: new WriteBatch(), dirsToSync: new Set(), declared: new Set(), started: new Set() };
}

/** The context of one pass of the host given by `host`. */
export function passContext(host: HostContext, hostPackage: string): ResourceContext {
  return { ...host, pass: newPass(), hostPackage };
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved as they came (given by runners that can tell). */
  output?: string;
  /** True when the program was killed because it ran past `timeoutMs`. */
  timedOut?: boolean;
}

export interface ExecOptions {
  env?: Record<string, string>;
  input?: string;
  timeoutMs?: number;
  /** Working folder (default: the host's own). */
  cwd?: string;
  /** Run in its own process group and, on timeout, kill the whole group (a shell's children too). */
  group?: boolean;
  /** Run as this user and group id (default: the host's own). */
  uid?: number;
  gid?: number;
  /** With `uid`: these supplementary groups (the user's, as login and Puppet's exec give them); without, the host's are dropped. */
  groups?: number[];
}

/** Runs a program (no shell) and resolves with its exit code and output; never throws on a non-zero exit. */
export type Exec = (cmd: string, args: string[], opts?: ExecOptions) => Promise<ExecResult>;

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

  /**
   * True when `apply` only stages its change in `ctx.pass.writes` (a file written to its
   * temporary name): the engine commits the batch (one sync for all of it, then the renames)
   * before it reads any of them back, and before any step that is not staged.
   */
  staged?: boolean;
  /** What `r` needs before it: the ids of the resources it names, each with the field that names it. Pre-flight checks the accounts and orders the pass by them. */
  needs?(r: R): Need[];
  /** Folders (ending in /) whose every declared file, directory and link `r` needs before it, as it needs what `needs` names: a package, apt's configuration. */
  needsUnder?(r: R): string[];
  /** Before the intent of a change of `r` is recorded: throw to refuse the change (the line fails, nothing changes). */
  beforeChange?(r: R, ctx: ResourceContext): Promise<void>;
  /** After a change of `r` was made and verified (`before` is what was there): the line, amended; throw to fail it. */
  afterChange?(r: R, line: ResourceResult, before: Observed, ctx: ResourceContext): Promise<ResourceResult>;
  /** Why part of `r` cannot be verified on this machine; the line is then `unverified` with this reason. */
  unverifiable?(r: R, ctx: ResourceContext): string | undefined;
  /** Machine paths whose change earlier in this pass calls for `refresh` (a service's restartOn); one ending in / watches everything under it (watchedChanges). */
  watches?(r: R): string[];
  /** React to changed watched paths (restart a service): what was done, and why it is unverified when it could not be checked; null when nothing was. */
  refresh?(r: R, ctx: ResourceContext, changed: string[]): Promise<{ change: string; unverified?: string } | null>;
  /** With `refresh`: what it would do for `changed` (`now`: `r` as observed before the pass), for `--noop`, without doing it; null when nothing. Without it: a restart. */
  wouldRefresh?(r: R, changed: string[], ctx: ResourceContext, now: Observed): string | null;

  /**
   * An action rather than a state (a command): never owned, never undone, and taken in its
   * declared place instead of apply. It decides whether to act this pass and returns the line.
   * `trigger` says why a watched resource calls for it (see `triggeredBy`), or is undefined.
   */
  act?(r: R, ctx: ResourceContext, trigger: string | undefined): Promise<ResourceResult>;
  /** With `act`: why it would act this pass (`--noop`), without acting; null when it would not. It may run read-only checks. */
  wouldAct?(r: R, ctx: ResourceContext, trigger: string | undefined): Promise<string | null>;
  /**
   * Ids of the resources whose change calls for `act`. The engine records the trigger as
   * pending in the store in the same durable write as the change's intent, passes it to `act`
   * only once every one of them applied cleanly in the pass, and clears it when `act` succeeds.
   */
  triggeredBy?(r: R): string[];
}

/** The paths in `changed` that `watched` (Handler.watches) names: each path itself, and anything under one that ends in /. */
export function watchedChanges(watched: string[], changed: Set<string>): string[] {
  const out = new Set<string>();
  for (const w of watched) {
    if (!w.endsWith('/')) {
      if (changed.has(w)) out.add(w);
    } else for (const p of changed) if (p.startsWith(w)) out.add(p);
  }
  return [...out];
}

/** A resource that must exist (or be applied) before the one that names it. */
export interface Need {
  /** The id of the resource needed, as `user:alice` or `file:/etc/app.conf`. */
  id: string;
  /** The field that names it, for pre-flight's messages. */
  field: string;
}

/** The host's own package: refusing a version rejected here, and smoke-testing an installed one (upgrade/upgrade.ts). */
export type HostUpgrade = Required<Pick<Handler<PackageResource>, 'beforeChange' | 'afterChange'>>;
