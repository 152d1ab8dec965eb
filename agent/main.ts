#!/usr/bin/env node
/**
 * mesh-host: the agent on each machine. This is the composition root: the only place that
 * builds the real clock, process runner and logger, reads the environment, and loads code
 * lazily; and the one place errors become exit codes and messages (a stack trace is for bugs,
 * not for bad input).
 */
import type { Actions } from './command-line.js';
import { MeshError } from '../core/errors.js';
import { EXIT, exitWith } from '../core/exit.js';
import { processRunner } from './exec.js';
import { SYNCS_IN_FLIGHT } from './atomic.js';
import { faultsFrom } from './fault.js';
import { progressLines } from './progress.js';
import { quickArgs } from './quick-args.js';
import type { Logger } from './log.js';
import type { HostContext, Loaders } from './resources/handler.js';

// A large batch on a busy machine fsyncs its files together on libuv's pool (atomic.ts): as many threads as it has in flight, set before the pool's first use.
process.env.UV_THREADPOOL_SIZE ??= String(SYNCS_IN_FLIGHT);

// The environment, read once: the crash test's faults, the log level, the upgrade probation.
const env = { fault: process.env.MESH_FAULT, progressAfterMs: Number(process.env.MESH_PROGRESS_AFTER_MS || 1000), logLevel: process.env.MESH_LOG_LEVEL ?? 'info', probation: process.env.MESH_HOST_PROBATION };

// Each command is imported when it runs: a process starts often (every `apply`, every upgrade's
// smoke run) and loading git, the logger and the report code it does not use is most of its start.
// For the same reason the code a pass may not need is handed down as loaders: the YAML parser and
// schemas (not needed when a cached declaration answers), the store's and config's schemas, and
// the host's self-upgrade (needed only when a pass changes the host's own package).
const load: Loaders = {
  // The schemas (zod) only when a declaration file needs more than the quick checks.
  parser: async () => (await import('../core/declaration/parse.js')).parserWith(async () => (await import('../core/declaration/schemas.js')).schemas),
  storeChecks: async () => (await import('./store/checks.js')).storeChecks,
  readConfig: async () => (await import('./config.js')).readConfig,
  hostUpgrade: async () => (await import('./upgrade/upgrade.js')).hostUpgrade,
  secrets: async () => await import('./secrets/host.js'),
};
// A long pass shows progress on a terminal only (progress.ts); a journal or a pipe gets the summary.
const progress = process.stderr.isTTY ? progressLines((line) => process.stderr.write(`${line}\n`), Date.now, env.progressAfterMs) : undefined;
/** A pass's context on `root`; with `log` at level debug (or trace), the pass says what it is doing there (HostContext.debug). */
const context = (root: string, log?: Logger): HostContext => ({
  root, exec: processRunner(process.env), now: () => new Date(), faults: faultsFrom(env.fault), load,
  ...(progress ? { progress } : {}),
  ...(log?.isLevelEnabled('debug') ? { debug: (fields: Record<string, unknown>, msg: string) => log.debug(fields, msg) } : {}),
});

/** The log level: `--log-level` when the command line gave one, else MESH_LOG_LEVEL, else info. */
let logLevel = env.logLevel;
/** The logger of a command that logs: JSON lines on stderr, drawn for a person when stderr is a terminal. */
const logger = async () => (await import('./log.js')).createLogger('mesh-host', logLevel, process.stderr.isTTY);
/** The logger of a command that logs nothing above debug (`apply`), loaded only when it is asked for at debug or trace. */
const debugLogger = async () => (logLevel === 'debug' || logLevel === 'trace' ? logger() : undefined);

/** What each command does, once its options are read. */
const actions: Actions = {
  async enrol(o) {
    const { enrol } = await import('./commands/enrol.js');
    const result = await enrol(o.tokenFile, context(o.root));
    const refused = result.briefing.filter((l) => !l.ok).map((l) => `${l.check}: ${l.detail}`);
    if (o.json) console.log(JSON.stringify(result));
    else if (result.outcome === 'ineligible') console.log(`enrolled as ${result.node} (generation ${result.generation}) with ${result.url}, but INELIGIBLE: it applies nothing here (${refused.join('; ')})\nnode key: ${result.nodeKey}\nfirst report: ${result.report}`);
    else console.log(`enrolled as ${result.node} (generation ${result.generation}) with ${result.url}\nnode key: ${result.nodeKey}\nfirst report: ${result.report}`);
    if (result.outcome === 'ineligible') process.exitCode = EXIT.failed; // joined, but nothing will be applied: a script must not read that as done
  },

  async run(o) {
    if (o.noop) {
      if (!o.once) throw new MeshError('E_USAGE', '--noop makes one pass that changes nothing: use it with --once');
      const [{ noopPass }, { printNoop }, log] = await Promise.all([import('./commands/noop.js'), import('./output.js'), logger()]);
      const result = await noopPass(context(o.root, log), log);
      process.exitCode = printNoop(result, Boolean(o.json));
      return;
    }
    if (!o.once && o.interval === 0) throw new MeshError('E_USAGE', '--interval 0 would poll the fleet server without a pause: give a time between passes, such as 30s (the default is 60s)');
    const [{ run, onceExit }, { printPass }, log, { parseProbation }] = await Promise.all([import('./commands/run.js'), import('./output.js'), logger(), import('./upgrade/upgrade.js')]);
    const stop = new AbortController();
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => stop.abort());
    const last = await run(context(o.root, log), log, { once: Boolean(o.once), intervalMs: o.interval, heartbeatMs: o.heartbeat, onPass: (p) => printPass(p, Boolean(o.json)), probationMs: parseProbation(env.probation) }, stop.signal);
    if (o.once && last) process.exitCode = onceExit(last);
  },

  async apply(o) {
    if (o.noop) {
      const [{ previewBundle }, { printNoop }, log] = await Promise.all([import('./commands/apply.js'), import('./output.js'), debugLogger()]);
      process.exitCode = printNoop({ commit: null, notes: [], preview: await previewBundle(o.bundle, context(o.root, log)) }, Boolean(o.json));
      return;
    }
    const [{ applyBundle }, { printBody }, log] = await Promise.all([import('./commands/apply.js'), import('./output.js'), debugLogger()]);
    const body = await applyBundle(o.bundle, context(o.root, log));
    printBody(body, Boolean(o.json));
    if (body.outcome === 'failed') process.exitCode = 1;
  },

  async state(o) {
    const [{ describeState }, { printState }] = await Promise.all([import('./commands/state.js'), import('./output.js')]);
    printState(await describeState(o.root, async () => (await import('./last-report.js')).failedInLastReport), Boolean(o.json));
  },

  async selfTest(o) {
    const [{ selfTest }, { printSelfTest }] = await Promise.all([import('./commands/self-test.js'), import('./output.js')]);
    const result = await selfTest(o.root);
    printSelfTest(result, Boolean(o.json));
    if (result.checks.some((c) => !c.ok)) process.exitCode = 1;
  },

  async rollback(o) {
    const { rollback } = await import('./commands/rollback.js');
    const result = await rollback(context(o.root), process.env);
    console.log(o.json ? JSON.stringify(result) : result.message);
    if (result.waiting) process.exitCode = EXIT.notYet;
    else if (!result.rolledBack) process.exitCode = EXIT.failed;
  },
};

/** A pass in one of its plain forms without commander (quick-args.ts); anything else through the whole command line. */
async function main(argv: string[]): Promise<void> {
  const quick = quickArgs(argv);
  if (quick?.command === 'run') return actions.run(quick.options);
  if (quick?.command === 'apply') return actions.apply(quick.options);
  const program = (await import('./command-line.js')).commandLine(actions, (level) => { logLevel = level ?? env.logLevel; });
  await program.parseAsync(argv, { from: 'user' });
}

main(process.argv.slice(2)).catch((e: unknown) => exitWith('mesh-host', e));
