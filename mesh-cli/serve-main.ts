/** Test-only entry: `mesh-cli serve` alone (the real CLI entry is mesh-cli/main.ts). */
import { Command } from 'commander';
import { messageOf } from '../core/errors.js';
import { serveCommand } from './commands/serve.js';

const program = new Command('mesh-cli');
serveCommand(program);
program.parseAsync(process.argv).catch((e: unknown) => {
  process.stderr.write(`error: ${messageOf(e)}\n`);
  process.exit(2);
});
