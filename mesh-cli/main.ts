#!/usr/bin/env node
/**
 * mesh-cli: the operator's command, run inside a checkout of the fleet repo. The
 * composition root: commands are registered here, and every thrown error becomes an exit code
 * and a message here, by the one table in core/exit.ts (a command sets 1 itself for a result
 * that is a failure).
 */
import { Command } from 'commander';
import { parseDuration } from '../core/duration.js';
import { exitWith, throwUsageErrors } from '../core/exit.js';
import { HOST_VERSION } from '../core/version.js';
import { openFleet } from './fleet.js';

/**
 * Every command, in the order help lists them, each registered by a function its module exports.
 * A run imports only the module of the command it runs (all of them for help, a version or a name
 * that is no command): the others' code, and the libraries only they use (the server's HTTP and
 * TLS, the secrets' age encryption), is neither initialised nor run: `status` starts ~30 ms
 * sooner (scripts/build.mjs keeps those libraries out of the compile as well).
 */
const COMMANDS: Array<[name: string, load: () => Promise<(program: Command) => unknown>]> = [
  ['init', async () => initCommand],
  ['serve', () => import('./commands/serve.js').then((m) => m.serveCommand)],
  ['token', async () => tokenCommand],
  ['status', () => import('./commands/status.js').then((m) => m.statusCommand)],
  ['validate', () => import('./commands/validate.js').then((m) => m.validateCommand)],
  ['plan', () => import('./commands/plan.js').then((m) => m.planCommand)],
  ['retire', () => import('./commands/retire.js').then((m) => m.retireCommand)],
  ['revoke', () => import('./commands/revoke.js').then((m) => m.revokeCommand)],
  ['signers', () => import('./commands/signers.js').then((m) => m.signersCommand)],
  ['vars', () => import('./commands/vars.js').then((m) => m.varsCommand)],
  ['mirror', () => import('./commands/mirror.js').then((m) => m.mirrorCommand)],
  ['verify-range', () => import('./commands/verify-range.js').then((m) => m.verifyRangeCommand)],
  ['set', () => import('./commands/set.js').then((m) => m.setCommand)],
  ['secret', () => import('./commands/secret.js').then((m) => m.secretCommand)],
  ['packages', () => import('./commands/packages.js').then((m) => m.packagesCommand)],
  ['hook', () => import('./commands/hook.js').then((m) => (program: Command) => m.hookCommand(program, process.env))],
];

const program = new Command('mesh-cli').description('operate a mesh fleet from its git repository').version(HOST_VERSION).showHelpAfterError();

function initCommand(program: Command): void {
  program
    .command('init')
    .description('scaffold a new fleet repo (mesh.yaml, nodes/, README) with a first commit')
    .argument('[dir]', 'folder for the new fleet repo', '.')
    .option('--name <name>', 'fleet name (default: the folder name)')
    .option('--signing-key <file>', 'the private SSH key (ed25519) that signs commits here; its public half is FILE.pub (default: ~/.ssh/id_ed25519, created when missing)')
    .option('--signer <name>', "the key's name in mesh.yaml signers (default: git's user.email)")
    .option('--example', 'also add the example fleet: groups web and db, two roles, variables at three levels (see its README)')
    .option('--remote <url>', "the fleet repo's URL, added as origin; a user:password in it goes to .git/mesh-credentials (0600, git's credential store), not into .git/config")
    .action(async (dir: string, o: { name?: string; signingKey?: string; signer?: string; example?: boolean; remote?: string }) => {
      const { initFleet } = await import('./commands/init.js');
      const { commit, key } = await initFleet(dir, o);
      console.log(`new fleet repo in ${dir} (commit ${commit.slice(0, 12)})`);
      console.log(`commits in it are signed with ${key.privateKeyFile}${key.created ? ' (created now)' : ''}; mesh.yaml trusts that key, and hosts apply only commits it signed`);
      const { HTTP_URL } = await import('../schema/fleet.js');
      if (o.remote === undefined) console.log('next: add a remote (git remote add origin URL), git push -u origin main, then mesh-cli token issue NODE');
      else if (HTTP_URL.test(o.remote)) console.log('next: git push -u origin main, then mesh-cli token issue NODE');
      // A path or an ssh address serves the operator; hosts need the fleet's HTTP(S) URL.
      else console.log(`next: git push -u origin main, then mesh-cli token issue NODE --url URL: hosts fetch over HTTP(S) only, so each token needs the http:// or https:// URL of this repository (origin, ${o.remote}, is not one)`);
    });
}

function tokenCommand(program: Command): void {
  program
    .command('token')
    .description('enrolment tokens')
    .command('issue')
    .description('bump NODE\'s generation, commit, and print its one-time token')
    .argument('<node>', 'node name')
    .option('--out <file>', 'write the token to FILE (mode 0600) instead of stdout')
    .option('--url <url>', 'fleet URL the host will use (default: the origin remote)')
    .option('--expires <duration>', 'how long the token is valid', parseDuration, 24 * 3_600_000)
    .option('--json', 'print the result as JSON (the token text included when not written to --out)')
    .option('--no-credential', 'issue no git credential for mesh-cli serve (the fleet repo is served by another git server)')
    .option('--group <path>', 'a new node goes in nodes/PATH/NODE/ (PATH: group names joined by /, e.g. web/eu); an existing node must already be there')
    .option('--mirror <url>', 'a read mirror of the fleet URL (repeatable, in order): the host polls and fetches main from the first that answers and pushes its reports to the fleet URL', (url: string, all: string[]) => [...all, url], [] as string[])
    .action(async (node: string, o: { out?: string; url?: string; expires: number; json?: boolean; credential: boolean; group?: string; mirror: string[] }) => {
      const { checkIssueOptions, issueToken, longLifeNote } = await import('./commands/token.js');
      checkIssueOptions({ out: o.out, expiresMs: o.expires });
      const fleet = await openFleet(process.cwd());
      const issued = await issueToken(fleet, node, { url: o.url, expiresMs: o.expires, now: new Date(), credential: o.credential, group: o.group, mirrors: o.mirror, out: o.out });
      if (o.json) console.log(JSON.stringify({ node, generation: issued.token.generation, expires: issued.token.expires, commit: issued.commit, out: o.out ?? null, ...(o.out ? {} : { token: issued.text }) }));
      else if (!o.out) process.stdout.write(issued.text);
      console.error(`token for ${node} generation ${issued.token.generation} committed as ${issued.commit.slice(0, 12)}${o.out ? `, written to ${o.out}` : ''}; push it (git push) to make it valid`);
      const note = longLifeNote(o.expires);
      if (note) console.error(note);
    });
}

const asked = COMMANDS.filter(([name]) => name === process.argv[2]);
for (const [, load] of asked.length ? asked : COMMANDS) (await load())(program);

throwUsageErrors(program).parseAsync().catch((e: unknown) => exitWith('mesh-cli', e));
