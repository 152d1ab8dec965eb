/**
 * A pass (`run`, `apply --bundle`) is what a machine starts most often, and loading commander
 * and building the whole command line (command-line.ts) is ~8 ms of a 250 ms pass. So the plain
 * forms of those two commands are read here, without it: the command, then its own options,
 * each at most once, a value as the next word. Anything else (help, `--log-level`, an unknown or
 * repeated option, `--option=value`, a value that starts with '-', a bad duration, no
 * `--bundle`) is null, and goes to commander, which words its own errors. Where this reads a
 * command line, commander reads it the same way (test/quick-args.test.ts).
 */
import { parseDuration } from '../core/duration.js';

/** The options every command takes, and those of the two pass commands (command-line.ts reads them all). */
export interface RootOptions { root: string; json?: boolean }
export interface RunOptions extends RootOptions { once?: boolean; interval: number; heartbeat: number; noop?: boolean }
export interface ApplyOptions extends RootOptions { bundle: string; noop?: boolean }

/** The defaults of the options that have one, in both readers. */
export const DEFAULTS = { root: '/', interval: 60_000, heartbeat: 15 * 60_000 } as const;

const VALUES = { run: ['root', 'interval', 'heartbeat'], apply: ['root', 'bundle'] } as const;
const FLAGS = { run: ['json', 'once', 'noop'], apply: ['json', 'noop'] } as const;

export type QuickArgs = { command: 'run'; options: RunOptions } | { command: 'apply'; options: ApplyOptions };

export function quickArgs(argv: readonly string[]): QuickArgs | null {
  const [command, ...rest] = argv;
  if (command !== 'run' && command !== 'apply') return null;
  const given = new Map<string, string | true>();
  for (let i = 0; i < rest.length; i++) {
    const name = /^--([a-z]+)$/.exec(rest[i]!)?.[1];
    if (!name || given.has(name)) return null;
    const value = rest[i + 1];
    if ((FLAGS[command] as readonly string[]).includes(name)) given.set(name, true);
    else if ((VALUES[command] as readonly string[]).includes(name) && value !== undefined && !value.startsWith('-')) given.set(name, rest[++i]!);
    else return null;
  }
  const text = (name: string) => { const v = given.get(name); return typeof v === 'string' ? v : undefined; };
  const flag = (name: string) => (given.has(name) ? { [name]: true } : {});
  const common = { root: text('root') ?? DEFAULTS.root, ...flag('json'), ...flag('noop') };
  if (command === 'apply') {
    const bundle = text('bundle');
    return bundle === undefined ? null : { command, options: { ...common, bundle } };
  }
  const interval = duration(text('interval'), DEFAULTS.interval), heartbeat = duration(text('heartbeat'), DEFAULTS.heartbeat);
  if (interval === null || heartbeat === null) return null;
  return { command, options: { ...common, ...flag('once'), interval, heartbeat } };
}

/** A duration option's milliseconds, its default when absent, null when commander would refuse it. */
function duration(text: string | undefined, fallback: number): number | null {
  if (text === undefined) return fallback;
  try {
    return parseDuration(text);
  } catch {
    return null;
  }
}
