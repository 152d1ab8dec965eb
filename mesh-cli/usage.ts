/** Usage errors exit 2, as the commands promise (commander's own default is 1, which means "failed" here). */
import type { Command } from 'commander';

/** Make `command`'s argument and option errors exit with 2; help and version still exit 0. */
export function usageExitsTwo(command: Command): Command {
  return command.exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));
}
