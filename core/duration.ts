/** Durations as operators type them ("90s", "10m", "24h", "7d") and as they read them ("5m ago"). */

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration that does not read. Used as an option's parser, commander reports it as its own
 * argument error ("option '--interval <duration>' argument 'x' is invalid. use …"): commander
 * knows such errors by this code and exit code (its InvalidArgumentError carries the same), so
 * that mesh-host need not load commander for a duration (agent/quick-args.ts).
 */
export class DurationError extends Error {
  readonly code = 'commander.invalidArgument';
  readonly exitCode = 1;
}

/** Milliseconds in "500ms", "30s", "1.5m", "2h", "7d" or plain seconds ("60"); a DurationError otherwise. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new DurationError('use a duration such as 30s, 10m, 24h or 7d');
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
}

/** A short age such as "45s", "12m", "5h" or "3d". */
export function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

/** How far two machines' clocks may differ before either is said to be wrong (the host's enrolment checks the same). */
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;

/** "2026-12-02T13:57:49Z (5m ago)", or "never"; a time ahead of `now` by more than two clocks may differ is said to be so. */
export function contact(at: string | null | undefined, now: Date): string {
  if (!at) return 'never';
  const ms = now.getTime() - Date.parse(at);
  return `${at.slice(0, 19)}Z (${ms < -MAX_CLOCK_SKEW_MS ? `${age(-ms)} in the future: a clock is wrong` : `${age(ms)} ago`})`;
}
