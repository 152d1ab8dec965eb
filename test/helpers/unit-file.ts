/**
 * Reading systemd unit files the way systemd does, for the test supervisor: sections and keys
 * (a key may repeat, as ExecStopPost= does), time spans ("5s", "10min", "1min 30s", a bare
 * number is seconds), EnvironmentFile= files, and $VAR / ${VAR} in command lines.
 */
import { existsSync, readFileSync } from 'node:fs';

export interface UnitFile {
  name: string;
  /** Every value of `key` in `section`, in file order. */
  all(section: string, key: string): string[];
  /** The last value of `key` in `section` (a later line overrides an earlier one), or `fallback`. */
  get(section: string, key: string, fallback?: string): string | undefined;
}

/** Parse the text of a unit file named `name`. */
export function parseUnit(name: string, text: string): UnitFile {
  const values = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0) throw new Error(`${name}: not a key=value line: ${line}`);
    const key = `${section}.${line.slice(0, eq).trim()}`;
    values.set(key, [...(values.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return {
    name,
    all: (s, k) => values.get(`${s}.${k}`) ?? [],
    get: (s, k, fallback) => values.get(`${s}.${k}`)?.at(-1) ?? fallback,
  };
}

const UNITS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, hr: 3_600_000, d: 86_400_000 };

/** A systemd time span in milliseconds. */
export function parseTimeSpan(text: string): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t) * 1000;
  let total = 0;
  const rest = t.replace(/(\d+(?:\.\d+)?)\s*([a-z]+)/g, (_all, n: string, unit: string) => {
    if (!(unit in UNITS)) throw new Error(`unknown time unit in "${text}"`);
    total += Number(n) * UNITS[unit]!;
    return '';
  });
  if (rest.trim() !== '') throw new Error(`not a time span: "${text}"`);
  return total;
}

/** The variables of an EnvironmentFile= (KEY=VALUE lines, optionally quoted). A missing file is an error unless `optional`. */
export function readEnvironmentFile(path: string, optional: boolean): Record<string, string> {
  if (!existsSync(path)) {
    if (optional) return {};
    throw new Error(`EnvironmentFile ${path} does not exist`);
  }
  const env: Record<string, string> = {};
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!.trim().replace(/^"(.*)"$|^'(.*)'$/, '$1$2');
  }
  return env;
}

/**
 * Split an Exec line into words as systemd does: whitespace separates them, '…' and "…" quote
 * one word, `$$` is a literal `$`; outside quotes, `$VAR` alone becomes its value split at
 * whitespace and `${VAR}` its value within the word.
 */
export function execWords(line: string, env: Record<string, string>): string[] {
  const words: string[] = [];
  for (const m of line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) {
    const quoted = m[1] ?? m[2];
    if (quoted !== undefined) {
      words.push(quoted.replaceAll('$$', '$'));
      continue;
    }
    const word = m[3]!;
    const whole = /^\$([A-Za-z_][A-Za-z0-9_]*)$/.exec(word);
    if (whole) words.push(...(env[whole[1]!] ?? '').split(/\s+/).filter(Boolean));
    else words.push(word.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_all, k: string | undefined) => (k === undefined ? '$' : env[k] ?? '')));
  }
  return words;
}
