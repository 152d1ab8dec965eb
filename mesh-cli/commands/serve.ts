import type { Command } from 'commander';
import { pino } from 'pino';
import { MeshError } from '../../agent/errors.js';
import { startGitServer } from '../server/git-http.js';

interface ServeOptions {
  data?: string;
  port: string;
  host: string;
  packages?: string;
}

/** Register `serve`: the embedded git server (and package repository) on a commander program. */
export function serveCommand(program: Command): Command {
  return program
    .command('serve')
    .description('serve the bare repositories DATA/NAME.git at /NAME.git over smart HTTP (git http-backend)')
    .option('--data <dir>', 'folder that holds the bare repositories (required)')
    .option('--port <n>', 'TCP port to listen on; 0 picks a free one', '8080')
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .option('--packages <dir>', 'folder served read-only under /packages/ (the fleet apt repository)')
    .action(async (opts: ServeOptions) => {
      await serve(opts);
    });
}

async function serve(opts: ServeOptions): Promise<void> {
  if (opts.data === undefined) {
    throw new MeshError('E_SERVE_DATA', 'serve needs --data DIR: the folder that holds the bare repositories (e.g. --data /var/lib/mesh/git)');
  }
  const port = parsePort(opts.port);
  // Requests go to stderr, one JSON line each; stdout carries only the "listening on" line.
  const logger = pino({ base: null }, pino.destination({ dest: 2, sync: true }));
  // Listen for signals before saying "listening": a caller may send one the moment it reads that line.
  let onSignal: (signal: NodeJS.Signals) => void = () => {};
  const stopped = new Promise<NodeJS.Signals>((resolve) => { onSignal = resolve; });
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  try {
    const server = await startGitServer({
      data: opts.data,
      host: opts.host,
      port,
      ...(opts.packages === undefined ? {} : { packages: opts.packages }),
      log: (msg, fields) => logger.info(fields ?? {}, msg),
    });
    process.stdout.write(`listening on ${server.url}\n`);
    logger.info({ signal: await stopped }, 'shutting down');
    await server.close();
  } finally {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
}

function parsePort(text: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 0 && port <= 65535)) {
    throw new MeshError('E_SERVE_PORT', `--port ${text} is not a TCP port: pass a number from 1 to 65535, or 0 for a free port`);
  }
  return port;
}
