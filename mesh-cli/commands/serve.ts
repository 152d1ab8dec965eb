/**
 * `mesh-cli serve --data DIR`: the embedded git server. Every request authenticates: an
 * operator with a credential from DATA/operators (one is made, and shown once on stderr, at the
 * first start), a node with the credential its token carried (server/mesh-auth.ts), and the
 * pre-receive hook (server/hooks.ts) decides which refs each may push. `--open` serves without
 * any of that, for trying mesh out on one machine, and says so. stdout's first line is always
 * `listening on URL`; credentials are never logged (the request log names the user only).
 * `--tls-cert FILE --tls-key FILE` serve https (the URL then says so) and print the
 * certificate's SHA-256 pin, which tokens for an https URL carry to the hosts.
 */
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { Command } from 'commander';
import { pino } from 'pino';
import { MeshError, messageOf } from '../../core/errors.js';
import { certificatePin } from '../../core/tls-pin.js';
import { checkedDir } from '../server/dirs.js';
import { GIT_PROCESSES, GIT_QUEUE, startGitServer, type Authorizer } from '../server/git-http.js';
import { hooksDir, installHooks } from '../server/hooks.js';
import { removeStaleLocks } from '../server/stale-locks.js';
import { meshAuthorizer } from '../server/mesh-auth.js';
import { ensureOperators, operatorsFile } from '../server/operators.js';
import type { TrustLog } from '../server/trusted-main.js';

interface ServeOptions {
  data?: string;
  port: string;
  host: string;
  packages?: string;
  open?: boolean;
  tlsCert?: string;
  tlsKey?: string;
  packCache: boolean;
  gitProcesses: string;
  gitQueue: string;
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
    .option('--open', 'serve without authentication: anyone who can connect may read and push (for trying mesh out)')
    .option('--tls-cert <file>', 'serve https with this certificate (PEM); tokens for the https URL pin it (needs --tls-key)')
    .option('--tls-key <file>', 'the private key (PEM) of --tls-cert')
    .option('--no-pack-cache', "make every fetch's pack anew (the default keeps one per request in DATA/.mesh-pack-cache: hosts fetching one change share it)")
    .option('--git-processes <n>', "git processes run at once for nodes' requests (an operator's never waits)", String(GIT_PROCESSES))
    .option('--git-queue <n>', 'nodes\' requests that may wait for a git process; beyond them a node is answered 429 with Retry-After and comes back then', String(GIT_QUEUE))
    .action(async (opts: ServeOptions) => {
      await serve(opts);
    });
}

async function serve(opts: ServeOptions): Promise<void> {
  if (opts.data === undefined) {
    throw new MeshError('E_SERVE_DATA', 'serve needs --data DIR: the folder that holds the bare repositories (e.g. --data /var/lib/mesh/git)');
  }
  const port = parsePort(opts.port);
  const gitProcesses = parseCount('--git-processes', opts.gitProcesses, 1);
  const gitQueue = parseCount('--git-queue', opts.gitQueue, 0);
  const tls = readTls(opts);
  // Requests go to stderr, one JSON line each; stdout carries only the "listening on" line.
  const logger = pino({ base: null }, pino.destination({ dest: 2, sync: true }));
  // Listen for signals before saying "listening": a caller may send one the moment it reads that line.
  let onSignal: (signal: NodeJS.Signals) => void = () => {};
  const stopped = new Promise<NodeJS.Signals>((resolve) => { onSignal = resolve; });
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  try {
    const untrusted = (repo: string, tip: string, code: string, message: string) => logger.warn({ repo, tip, code }, `main's tip is not trusted; node identities stay as on the last trusted main: ${message}`);
    const ignored = (where: string, why: string) => logger.warn({ file: where }, `the operators file's line ${where} is ignored: ${why}`);
    const access = await accessControl(opts.data, Boolean(opts.open), untrusted, ignored);
    for (const [repo, ref] of removeStaleLocks(opts.data)) logger.warn({ repo, ref }, 'removed a lock on a report branch left by a server that was stopped while it updated it; that node\'s pushes land again');
    const server = await startGitServer({
      data: opts.data,
      host: opts.host,
      port,
      ...(opts.packages === undefined ? {} : { packages: opts.packages }),
      packCache: opts.packCache,
      gitProcesses,
      gitQueue,
      ...(access.authorize ? { authorize: access.authorize } : {}),
      ...(tls ? { tls: { cert: tls.cert, key: tls.key } } : {}),
      log: (msg, fields, level = 'info') => logger[level](fields ?? {}, msg),
    });
    if (tls) process.stderr.write(`mesh-cli serve: TLS certificate ${opts.tlsCert}, SHA-256 pin ${tls.pin}; in the fleet checkout, 'git config http.sslCAInfo ${opts.tlsCert}' lets git trust it and makes 'mesh-cli token issue' put the pin in tokens\n`);
    process.stderr.write(access.notice(server.url)); // made only now, so that a server that cannot listen leaves no unseen credential
    process.stdout.write(`listening on ${server.url}\n`);
    logger.info({ signal: await stopped }, 'shutting down');
    await server.close();
  } finally {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
}

/** The Authorizer (none when open) and what to tell the person who started the server. */
async function accessControl(data: string, open: boolean, untrusted: TrustLog, ignored: (where: string, why: string) => void): Promise<{ authorize?: Authorizer; notice: (url: string) => string }> {
  if (open) return { notice: () => 'mesh-cli serve: --open: no authentication; anyone who can connect may read and push every repository\n' };
  const real = await checkedDir(data, 'data');
  const file = operatorsFile(real);
  return {
    authorize: meshAuthorizer(real, installHooks(hooksDir(real)), { untrusted, ignored }),
    notice: (url) => {
      const secret = ensureOperators(real);
      if (secret === null) return `mesh-cli serve: operators from ${file}; nodes authenticate with the credential of their token\n`;
      return (
        `mesh-cli serve: created ${file} with one operator credential (only its sha256 is kept; this is the one time it is shown):\n` +
        `mesh-cli serve: operator credential: operator:${secret}\n` +
        `mesh-cli serve: give it to a new fleet checkout with 'mesh-cli init DIR --remote ${url.replace('://', `://operator:${secret}@`)}NAME.git': it goes to a git credential store file (0600), not into .git/config\n`
      );
    },
  };
}

/** The certificate, key and pin of --tls-cert/--tls-key (both or neither), or null for plain http. */
function readTls(opts: ServeOptions): { cert: Buffer; key: Buffer; pin: string } | null {
  if (opts.tlsCert === undefined && opts.tlsKey === undefined) return null;
  if (opts.tlsCert === undefined || opts.tlsKey === undefined) throw new MeshError('E_SERVE_TLS', 'https needs both --tls-cert FILE and --tls-key FILE (PEM): the certificate and its private key');
  const read = (what: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (e) {
      throw new MeshError('E_SERVE_TLS', `cannot read the TLS ${what} ${file}: ${messageOf(e)}`);
    }
  };
  const cert = read('certificate', opts.tlsCert);
  const key = read('key', opts.tlsKey);
  let pin: string;
  try {
    pin = certificatePin(cert);
  } catch (e) {
    throw new MeshError('E_SERVE_TLS', `--tls-cert ${opts.tlsCert} is not a PEM certificate: ${messageOf(e)}`);
  }
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new MeshError('E_SERVE_TLS', `--tls-key ${opts.tlsKey} is not the private key of --tls-cert ${opts.tlsCert}: ${messageOf(e)}`);
  }
  return { cert, key, pin };
}

function parsePort(text: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 0 && port <= 65535)) {
    throw new MeshError('E_SERVE_PORT', `--port ${text} is not a TCP port: pass a number from 1 to 65535, or 0 for a free port`);
  }
  return port;
}

/** A whole number of at least `least` given to `flag`. */
function parseCount(flag: string, text: string, least: number): number {
  const n = /^\d{1,6}$/.test(text) ? Number(text) : NaN;
  if (!(n >= least)) throw new MeshError('E_SERVE_LIMIT', `${flag} ${text} is not a count: pass a whole number of at least ${least}`);
  return n;
}
