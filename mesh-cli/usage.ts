/**
 * Usage errors exit 2 (commander's own default is 1, which means "failed" here). main.ts makes
 * every command throw them to its one catch (core/exit.ts); this is kept for commands that
 * still call it, and does the same.
 */
import type { Command } from 'commander';

/** Make `command` throw its argument and option errors to main.ts's catch, which exits 2 (help and version exit 0). */
export function usageExitsTwo(command: Command): Command {
  return command.exitOverride();
}
