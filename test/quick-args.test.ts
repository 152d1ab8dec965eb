/**
 * mesh-host reads the plain forms of a pass without commander (agent/quick-args.ts). Wherever it
 * does, commander must read the same command line the same way: every combination of the pass
 * commands' options, in both orders, with good and bad values, is read by both and compared.
 */
import { describe, expect, it } from 'vitest';
import { commandLine, type Actions } from '../agent/command-line.js';
import { quickArgs } from '../agent/quick-args.js';

/** What commander hands the action for `argv`, or the usage error it throws. */
async function byCommander(argv: string[]): Promise<{ command: string; options: unknown } | { error: string }> {
  let seen: { command: string; options: unknown } | null = null;
  const record = (command: string) => async (options: unknown) => { seen = { command, options: { ...(options as object) } }; };
  const actions: Actions = { enrol: record('enrol'), run: record('run'), apply: record('apply'), state: record('state'), selfTest: record('self-test'), rollback: record('rollback') };
  const program = commandLine(actions, () => {});
  program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    return { error: (e as { code: string }).code };
  }
  return seen ?? { error: 'no action' };
}

/** Every ordering of every subset of `parts` (each part one option and its value, if any). */
function forms(parts: string[][]): string[][] {
  const out: string[][] = [];
  const grow = (used: string[][], rest: string[][]) => {
    out.push(used.flat());
    rest.forEach((p, i) => grow([...used, p], [...rest.slice(0, i), ...rest.slice(i + 1)]));
  };
  grow([], parts);
  return out;
}

describe('the pass command lines read without commander', () => {
  const apply = forms([['--bundle', 'b'], ['--root', '/r'], ['--json'], ['--noop']]).map((f) => ['apply', ...f]);
  const run = forms([['--once'], ['--root', 'r'], ['--interval', '90s'], ['--heartbeat', '2m'], ['--noop'], ['--json']]).map((f) => ['run', ...f]);
  const odd = [
    ['apply'], ['apply', '--bundle'], ['apply', '--bundle', '-x'], ['apply', '--bundle=b'], ['apply', '--bundle', 'b', '--bundle', 'c'],
    ['apply', '--bundle', 'b', 'extra'], ['apply', '--bundle', 'b', '--once'], ['apply', '--bundle', ''], ['run', '--interval', 'soon'],
    ['run', '--heartbeat', '0'], ['run', '--interval', '1.5m', '--once'], ['run', '--help'], ['run', '-h'], ['--log-level', 'warn', 'run', '--once'],
    ['run', '--once', '--log-level', 'debug'], ['state'], ['self-test', '--root', 'r'], ['run', '--root', '--json'], ['run', '--'], [],
  ];

  it('reads every plain form as commander does, and leaves the rest to commander', async () => {
    let quick = 0;
    for (const argv of [...apply, ...run, ...odd]) {
      const mine = quickArgs(argv);
      if (mine === null) continue;
      quick++;
      expect(await byCommander(argv), argv.join(' ')).toEqual(mine);
    }
    // Every apply with a --bundle and every run form here is plain; of the odd ones, only the empty
    // bundle name, the zero heartbeat and the decimal interval.
    expect(quick).toBe(apply.filter((f) => f.includes('--bundle')).length + run.length + 3);
  });

  it('leaves help, --log-level, repeated and glued options, stray words and bad values to commander', () => {
    for (const argv of [['apply'], ['apply', '--bundle', '-x'], ['apply', '--bundle=b'], ['apply', '--bundle', 'b', '--bundle', 'c'], ['apply', '--bundle', 'b', 'extra'], ['apply', '--bundle', 'b', '--once'], ['run', '--interval', 'soon'], ['run', '--help'], ['run', '-h'], ['--log-level', 'warn', 'run', '--once'], ['run', '--once', '--log-level', 'debug'], ['state'], ['run', '--root', '--json'], ['run', '--'], []]) {
      expect(quickArgs(argv), argv.join(' ')).toBeNull();
    }
  });

  it('gives the defaults commander gives', () => {
    expect(quickArgs(['run', '--once'])).toEqual({ command: 'run', options: { root: '/', once: true, interval: 60_000, heartbeat: 900_000 } });
    expect(quickArgs(['apply', '--bundle', 'b'])).toEqual({ command: 'apply', options: { root: '/', bundle: 'b' } });
  });
});
