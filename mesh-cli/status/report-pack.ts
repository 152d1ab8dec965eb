/**
 * Report commits fetched by id from `mesh-cli serve` in one request (server/report-pack.ts),
 * indexed into the report store by `git index-pack`: the same objects a shallow `git fetch` of
 * the same tips brings, without its negotiation. Used for the tips of a status run, one commit
 * deep; anything else, and every server that does not answer it (any other git server: 404),
 * goes through `git fetch` as before, which also says what went wrong when something did.
 *
 * It is asked directly (status/http-direct.ts), where that reaches the server as git would.
 */
import type { IncomingMessage } from 'node:http';
import { spawnGit } from '../git.js';
import { REPORT_PACK_PATH } from '../server/report-pack.js';
import { request, type Direct } from './http-direct.js';

/**
 * Fetches report commits into the store by id; false when it could not (the caller fetches with
 * git); 'refused' when the server refused the credential written in the remote's URL (the caller
 * says so without git, which would have the credential helpers forget theirs: http-direct.ts).
 */
export type ReportPackFetch = (wants: string[]) => Promise<boolean | 'refused'>;

/**
 * A ReportPackFetch from `remote` into the bare repository `store` names (once it is made). After
 * a server answers that it has no such endpoint, or the way to it is not plain, it is not asked again.
 */
export function reportPackFetch(remote: Direct, store: Promise<string>): ReportPackFetch {
  let absent = false;
  return async (wants) => {
    const to = absent ? null : await remote.target();
    if (!to || wants.length === 0) return false;
    const answer = await request(to, 'POST', REPORT_PACK_PATH, { type: 'text/plain', text: wants.join('\n') + '\n' }).catch(() => null);
    if (!answer) return false;
    if (answer.statusCode !== 200) {
      answer.resume();
      if (answer.statusCode === 401 && to.authInUrl) return 'refused';
      if (answer.statusCode === 404 || answer.statusCode === 405) absent = true; // not a mesh-cli serve
      return false;
    }
    return indexPack(await store, answer);
  };
}

/** Pipe the answer into `git index-pack --stdin` in `store`; true when git indexed a whole pack. */
function indexPack(store: string, answer: IncomingMessage): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawnGit(store, [`--git-dir=${store}`, 'index-pack', '--stdin']);
    child.stdout.resume();
    child.stderr.resume();
    child.stdin.on('error', () => undefined); // index-pack stopped reading: its exit says why
    answer.on('error', () => child.stdin.destroy());
    answer.on('aborted', () => child.stdin.destroy());
    answer.pipe(child.stdin);
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code === 0));
  });
}
