/**
 * What a node's push holds, checked in-process by core/access/rules.ts while git holds the push
 * in its quarantine. `serve`'s pre-receive hook (hooks.ts) is a few lines of bash that hand this
 * listener, on 127.0.0.1, the ticket the server gave the push (git config mesh.check: port and
 * ticket, made per request, known only to that request's git), git's quarantine paths and the
 * "old new ref" lines; it answers the refusals, then `ok` or `refused`. No Node starts per push,
 * and the checks are the ones `mesh-cli hook` runs on other git servers.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { isAbsolute, join } from 'node:path';
import { enrolmentFolder } from '../../core/access/enrolments.js';
import { refusedNodePush, refusedRefs, type Pusher, type RefUpdate } from '../../core/access/rules.js';
import { messageOf } from '../../core/errors.js';
import { gitPushReader } from './push-reader.js';

/** A node's push the server let through to git: its bare repository, the node, and where its enrolments are recorded. */
export interface NodePush {
  dir: string;
  pusher: Pusher & { role: 'node' };
  enrolments: string;
}

export interface PushChecks {
  /** Make a ticket for `push`: the git config its hook reads, and `done` to forget it when the request ends. */
  register(push: NodePush): { config: Array<[string, string]>; done(): void };
  close(): Promise<void>;
}

/** Listen on 127.0.0.1 (a free port) for the hooks of this server's node pushes. */
export function startPushChecks(): Promise<PushChecks> {
  const tickets = new Map<string, NodePush>();
  const server: Server = createServer((socket) => {
    socket.on('error', () => {}); // a hook killed mid-answer: nothing to tell
    void answer(socket, tickets);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      resolve({
        register(push) {
          const ticket = randomBytes(18).toString('base64url');
          tickets.set(ticket, push);
          return { config: [['mesh.check', `${port} ${ticket}`]], done: () => tickets.delete(ticket) };
        },
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}

/** The hook's question: four header lines (ticket, GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES, GIT_QUARANTINE_PATH), the updates, a blank line. */
async function answer(socket: Socket, tickets: Map<string, NodePush>): Promise<void> {
  let reply: string[];
  try {
    const lines = await readQuestion(socket);
    const [ticket, objects, alternates, quarantine] = lines;
    const push = tickets.get(ticket ?? '');
    if (!push) reply = ['mesh: push refused: the server does not know this push'];
    else {
      const at = (p: string | undefined) => (p ? (isAbsolute(p) ? p : join(push.dir, p)) : undefined);
      const env = { GIT_OBJECT_DIRECTORY: at(objects), GIT_ALTERNATE_OBJECT_DIRECTORIES: alternates?.split(':').map(at).join(':') || undefined, GIT_QUARANTINE_PATH: at(quarantine) };
      reply = await refusals(push, lines.slice(4).map(update), Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)));
    }
  } catch (e) {
    reply = [`mesh: push refused: the server could not read it (${messageOf(e)})`];
  }
  socket.end([...reply, reply.length > 0 ? 'refused' : 'ok', ''].join('\n'));
}

async function refusals(push: NodePush, updates: RefUpdate[], env: NodeJS.ProcessEnv): Promise<string[]> {
  const refused = refusedRefs(push.pusher, updates, null); // decided before git started; asked again, as it costs nothing
  if (refused.length > 0) return refused;
  const records = enrolmentFolder(push.enrolments);
  for (const u of updates) {
    const why = await refusedNodePush(push.pusher, u.new, gitPushReader(push.dir, push.pusher.user, env), records);
    if (why) return [why];
  }
  return [];
}

function update(line: string): RefUpdate {
  const [old, next, ref] = line.split(' ');
  if (!old || !next || !ref) throw new Error(`not a ref update: ${JSON.stringify(line)}`);
  return { old, new: next, ref };
}

/** The lines up to the first blank one after the four header lines (at most 1 MiB). */
function readQuestion(socket: Socket): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (b: Buffer) => {
      text += b.toString('utf8');
      const lines = text.split('\n');
      const blank = lines.findIndex((l, i) => i >= 4 && l === '' && i < lines.length - 1);
      if (blank >= 0) {
        socket.off('data', onData);
        resolve(lines.slice(0, blank));
      } else if (text.length > 1024 * 1024) reject(new Error('the question is too long'));
    };
    socket.on('data', onData);
    socket.once('end', () => reject(new Error('the hook hung up before its question was complete')));
    socket.once('error', reject);
  });
}
