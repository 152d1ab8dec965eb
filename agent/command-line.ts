/**
 * mesh-host's whole command line, read by commander: every command, option, help text and
 * usage error. main.ts loads it for anything but a pass in its plain form (quick-args.ts), and
 * hands it what each command does.
 */
import { Command, Option } from 'commander';
import { parseDuration } from '../core/duration.js';
import { throwUsageErrors } from '../core/exit.js';
import { HOST_VERSION } from '../core/version.js';
import { DEFAULTS, type ApplyOptions, type RootOptions, type RunOptions } from './quick-args.js';

export interface EnrolOptions extends RootOptions { tokenFile: string }

/** What each command does with its options. */
export interface Actions {
  enrol(o: EnrolOptions): Promise<void>;
  run(o: RunOptions): Promise<void>;
  apply(o: ApplyOptions): Promise<void>;
  state(o: RootOptions): Promise<void>;
  selfTest(o: RootOptions): Promise<void>;
  rollback(o: RootOptions): Promise<void>;
}

/** The program; `onLogLevel` hears `--log-level` (or its absence) before a command runs. */
export function commandLine(actions: Actions, onLogLevel: (level: string | undefined) => void): Command {
  const program = new Command('mesh-host')
    .description('the mesh agent: applies this machine\'s declaration from the fleet repo and reports back')
    .version(HOST_VERSION)
    .addOption(new Option('--log-level <level>', 'how much to log on stderr (default: MESH_LOG_LEVEL, else info)').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']))
    .showHelpAfterError()
    .hook('preAction', () => onLogLevel(program.opts<{ logLevel?: string }>().logLevel));
  const withRoot = (c: Command) => c.option('--root <dir>', 'the machine\'s root folder (simulated machines use a temporary folder)', DEFAULTS.root).option('--json', 'print results as JSON');

  withRoot(program.command('enrol').description('join the fleet with a one-time token').requiredOption('--token-file <file>', 'the token file from mesh-cli token issue'))
    .action((o: EnrolOptions) => actions.enrol(o));

  withRoot(program.command('run').description('the reconcile loop'))
    .option('--once', 'run one pass and exit')
    .option('--interval <duration>', 'time between passes', parseDuration, DEFAULTS.interval)
    .option('--heartbeat <duration>', 'send an unchanged report at least this often', parseDuration, DEFAULTS.heartbeat)
    .option('--noop', 'with --once: say what the pass would change here, changing nothing and reporting nothing (exit 4 when something would change)')
    .action((o: RunOptions) => actions.run(o));

  withRoot(program.command('apply').description('one pass from a local folder of declaration files (no git, no report)'))
    .requiredOption('--bundle <dir>', 'folder of declaration files')
    .option('--noop', 'say what applying the bundle would change here, changing nothing (exit 4 when something would change)')
    .action((o: ApplyOptions) => actions.apply(o));

  withRoot(program.command('state').description('lifecycle state, identity, last applied commit, owned resources')).action((o: RootOptions) => actions.state(o));
  withRoot(program.command('self-test').description('the smoke run made before a new host binary takes over')).action((o: RootOptions) => actions.selfTest(o));
  withRoot(program.command('rollback').description('put the last good host version back (run by mesh-host-rollback.service)')).action((o: RootOptions) => actions.rollback(o));
  return throwUsageErrors(program);
}
