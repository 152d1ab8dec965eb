#!/usr/bin/env node
/**
 * mesh-host: the agent on each machine. This is the composition root: the only place that
 * builds the real clock, process runner and logger, reads the environment, and loads code
 * lazily; and the one place errors become exit codes and messages (a stack trace is for bugs,
 * not for bad input).
 */
import { Command, Option } from 'commander';
import { parseDuration } from '../core/duration.js';
import { MeshError } from '../core/errors.js';
import { EXIT, exitWith, throwUsageErrors } from '../core/exit.js';
import { processRunner } from './exec.js';
import { faultsFrom } from './fault.js';
import { progressLines } from './progress.js';
import type { HostContext, Loaders } from './resources/handler.js';
import { HOST_VERSION } from '../core/version.js';

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
const context = (root: string): HostContext => ({ root, exec: processRunner(process.env), now: () => new Date(), faults: faultsFrom(env.fault), load, ...(progress ? { progress } : {}) });

const program = new Command('mesh-host')
  .description('the mesh agent: applies this machine\'s declaration from the fleet repo and reports back')
  .version(HOST_VERSION)
  .addOption(new Option('--log-level <level>', 'how much to log on stderr (default: MESH_LOG_LEVEL, else info)').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']))
  .showHelpAfterError();
/** The logger of a command that logs: JSON lines on stderr, drawn for a person when stderr is a terminal. */
const logger = async () => (await import('./log.js')).createLogger('mesh-host', program.opts<{ logLevel?: string }>().logLevel ?? env.logLevel, process.stderr.isTTY);
const withRoot = (c: Command) => c.option('--root <dir>', 'the machine\'s root folder (simulated machines use a temporary folder)', '/').option('--json', 'print results as JSON');

withRoot(program.command('enrol').description('join the fleet with a one-time token').requiredOption('--token-file <file>', 'the token file from mesh-cli token issue'))
  .action(async (o: { tokenFile: string; root: string; json?: boolean }) => {
    const { enrol } = await import('./commands/enrol.js');
    const result = await enrol(o.tokenFile, context(o.root));
    const refused = result.briefing.filter((l) => !l.ok).map((l) => `${l.check}: ${l.detail}`);
    if (o.json) console.log(JSON.stringify(result));
    else if (result.outcome === 'ineligible') console.log(`enrolled as ${result.node} (generation ${result.generation}) with ${result.url}, but INELIGIBLE: it applies nothing here (${refused.join('; ')})\nnode key: ${result.nodeKey}\nfirst report: ${result.report}`);
    else console.log(`enrolled as ${result.node} (generation ${result.generation}) with ${result.url}\nnode key: ${result.nodeKey}\nfirst report: ${result.report}`);
    if (result.outcome === 'ineligible') process.exitCode = EXIT.failed; // joined, but nothing will be applied: a script must not read that as done
  });

withRoot(program.command('run').description('the reconcile loop'))
  .option('--once', 'run one pass and exit')
  .option('--interval <duration>', 'time between passes', parseDuration, 60_000)
  .option('--heartbeat <duration>', 'send an unchanged report at least this often', parseDuration, 15 * 60_000)
  .option('--noop', 'with --once: say what the pass would change here, changing nothing and reporting nothing (exit 4 when something would change)')
  .action(async (o: { root: string; json?: boolean; once?: boolean; interval: number; heartbeat: number; noop?: boolean }) => {
    if (o.noop) {
      if (!o.once) throw new MeshError('E_USAGE', '--noop makes one pass that changes nothing: use it with --once');
      const [{ noopPass }, { printNoop }, log] = await Promise.all([import('./commands/noop.js'), import('./output.js'), logger()]);
      const result = await noopPass(context(o.root), log);
      process.exitCode = printNoop(result, Boolean(o.json));
      return;
    }
    const [{ run }, { printPass }, log, { parseProbation }] = await Promise.all([import('./commands/run.js'), import('./output.js'), logger(), import('./upgrade/upgrade.js')]);
    const stop = new AbortController();
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => stop.abort());
    const last = await run(context(o.root), log, { once: Boolean(o.once), intervalMs: o.interval, heartbeatMs: o.heartbeat, onPass: (p) => printPass(p, Boolean(o.json)), probationMs: parseProbation(env.probation) }, stop.signal);
    if (o.once && last && (['failed', 'untrusted', 'ineligible'].includes(last.report.outcome) || !last.sent || last.disconnected)) process.exitCode = EXIT.failed;
  });

withRoot(program.command('apply').description('one pass from a local folder of declaration files (no git, no report)'))
  .requiredOption('--bundle <dir>', 'folder of declaration files')
  .option('--noop', 'say what applying the bundle would change here, changing nothing (exit 4 when something would change)')
  .action(async (o: { root: string; json?: boolean; bundle: string; noop?: boolean }) => {
    if (o.noop) {
      const [{ previewBundle }, { printNoop }] = await Promise.all([import('./commands/apply.js'), import('./output.js')]);
      process.exitCode = printNoop({ commit: null, notes: [], preview: await previewBundle(o.bundle, context(o.root)) }, Boolean(o.json));
      return;
    }
    const [{ applyBundle }, { printBody }] = await Promise.all([import('./commands/apply.js'), import('./output.js')]);
    const body = await applyBundle(o.bundle, context(o.root));
    printBody(body, Boolean(o.json));
    if (body.outcome === 'failed') process.exitCode = 1;
  });

withRoot(program.command('state').description('lifecycle state, identity, last applied commit, owned resources')).action(async (o: { root: string; json?: boolean }) => {
  const [{ describeState }, { printState }] = await Promise.all([import('./commands/state.js'), import('./output.js')]);
  printState(await describeState(o.root, async () => (await import('./last-report.js')).failedInLastReport), Boolean(o.json));
});

withRoot(program.command('self-test').description('the smoke run made before a new host binary takes over')).action(async (o: { root: string; json?: boolean }) => {
  const [{ selfTest }, { printSelfTest }] = await Promise.all([import('./commands/self-test.js'), import('./output.js')]);
  const result = await selfTest(o.root);
  printSelfTest(result, Boolean(o.json));
  if (result.checks.some((c) => !c.ok)) process.exitCode = 1;
});

withRoot(program.command('rollback').description('put the last good host version back (run by mesh-host-rollback.service)')).action(async (o: { root: string; json?: boolean }) => {
  const { rollback } = await import('./commands/rollback.js');
  const result = await rollback(context(o.root), process.env);
  console.log(o.json ? JSON.stringify(result) : result.message);
  if (result.waiting) process.exitCode = EXIT.notYet;
  else if (!result.rolledBack) process.exitCode = EXIT.failed;
});

throwUsageErrors(program).parseAsync().catch((e: unknown) => exitWith('mesh-host', e));
