/**
 * A read-only git client for the operator's checkout: it speaks protocol v2 over smart HTTP
 * itself, so `mesh-cli status` can learn every report branch's tip (one ls-refs) and read the
 * changed ones (one fetch, parsed in memory by mesh-cli/pack.ts) without `git fetch` writing
 * 10,000 refs and a pack into the checkout. Nothing is written to the repo. Remotes that are not
 * HTTP (a local path, file://, ssh) fall back to the git binary, which is fine for small fleets.
 */
import { MeshError, messageOf } from '../core/errors.js';
import { errPacket, pktLine, pktLines } from '../core/git/pkt-line.js';
import { packOfResponse, parsePack, type GitObject } from './pack.js';
import { gitBytes } from './git.js';

export type { GitObject } from './pack.js';

export interface Remote {
  /** One protocol-v2 ls-refs request: every ref starting with one of `prefixes` → its oid. */
  lsRefs(prefixes: string[]): Promise<Map<string, string>>;
  /** One protocol-v2 fetch request ("want" each of wants, "have" each of haves, "deepen N" when deepen is given, done) → every object of the returned pack, by oid. */
  fetchObjects(opts: { wants: string[]; haves?: string[]; deepen?: number }): Promise<Map<string, GitObject>>;
}

/** The remote `name` (default origin) of the checkout at `dir`. */
export async function openRemote(dir: string, name = 'origin'): Promise<Remote> {
  const url = (await gitBytes(dir, ['remote', 'get-url', name])).toString('utf8').trim();
  return /^https?:\/\//i.test(url) ? httpRemote(dir, name, url) : gitRemote(dir, name);
}

interface Credential { username: string; password: string }

function httpRemote(dir: string, name: string, raw: string): Remote {
  const u = new URL(raw);
  // Credentials in the URL are sent up front (saves the 401 round trip) and never appear in messages.
  let cred: Credential | null = u.username || u.password ? { username: decodeURIComponent(u.username), password: decodeURIComponent(u.password) } : null;
  const embedded = cred !== null;
  u.username = '';
  u.password = '';
  const url = u.href.replace(/\/+$/, '');
  const where = `remote '${name}' (${url})`;

  async function send(body: string): Promise<Response> {
    const headers: Record<string, string> = {
      'Content-Type': 'application/x-git-upload-pack-request',
      Accept: 'application/x-git-upload-pack-result',
      'Git-Protocol': 'version=2',
    };
    if (cred) headers.Authorization = 'Basic ' + Buffer.from(`${cred.username}:${cred.password}`).toString('base64');
    try {
      return await fetch(`${url}/git-upload-pack`, { method: 'POST', headers, body, signal: AbortSignal.timeout(120_000) });
    } catch (e) {
      const why = messageOf((e as { cause?: unknown }).cause ?? e);
      throw new MeshError('E_FETCH', `cannot reach ${where}: ${why}; check that the fleet server is running`, { next: 'retry', cause: e });
    }
  }

  async function post(lines: string[]): Promise<Buffer> {
    const body = lines.join(''); // pkt-lines of ASCII text
    let res = await send(body);
    if (res.status === 401 && !embedded) {
      await res.arrayBuffer();
      const asked = await credential(dir, 'fill', u).catch((e) => { throw authError(where, 401, messageOf(e)); });
      cred = asked;
      res = await send(body);
      if (res.status === 401 || res.status === 403) await credential(dir, 'reject', u, asked).catch(() => undefined);
      else if (res.ok) await credential(dir, 'approve', u, asked).catch(() => undefined);
    }
    if (res.status === 401 || res.status === 403) throw authError(where, res.status);
    if (!res.ok) {
      const busy = res.status === 429 || res.status === 503 || res.status >= 500;
      const after = res.headers.get('retry-after');
      throw new MeshError('E_FETCH', `${where} answered HTTP ${res.status}${after ? ` (Retry-After: ${after})` : ''}`, {
        next: busy ? 'retry' : 'human', data: { status: res.status, url, ...(after ? { retryAfter: after } : {}) },
      });
    }
    if (!res.headers.get('content-type')?.startsWith('application/x-git-upload-pack-result')) {
      throw new MeshError('E_FETCH', `${where} is not a git server speaking protocol v2 (answered ${res.headers.get('content-type')})`);
    }
    try {
      return Buffer.from(await res.arrayBuffer()); // undici collects the chunks and joins them once
    } catch (e) {
      throw new MeshError('E_FETCH', `the answer of ${where} was cut off: ${messageOf(e)}`, { next: 'retry', cause: e });
    }
  }

  return {
    async lsRefs(prefixes) {
      const body = await post(request('ls-refs', prefixes.map((p) => `ref-prefix ${p}\n`)));
      const refs = new Map<string, string>();
      for (const p of pktLines(body)) {
        if (typeof p === 'number') break;
        const err = errPacket(p);
        if (err !== null) throw new MeshError('E_FETCH', `${where} refused ls-refs: ${err}`);
        const line = p.toString('utf8').trimEnd();
        const sp = line.indexOf(' ');
        const end = line.indexOf(' ', sp + 1); // attributes (symref-target, peeled) follow the name
        const ref = line.slice(sp + 1, end < 0 ? undefined : end);
        if (prefixes.length === 0 || prefixes.some((x) => ref.startsWith(x))) refs.set(ref, line.slice(0, sp));
      }
      return refs;
    },
    async fetchObjects({ wants, haves = [], deepen }) {
      if (wants.length === 0) return new Map();
      const args = [...wants.map((w) => `want ${w}\n`), ...haves.map((h) => `have ${h}\n`), ...(deepen === undefined ? [] : [`deepen ${deepen}\n`])];
      const body = await post(request('fetch', ['ofs-delta\n', 'no-progress\n', ...args, 'done\n']));
      return parsePack(packOfResponse(body, where));
    },
  };
}

/** A protocol v2 command request: the command and our agent, a delim packet, its arguments, a flush packet. */
function request(command: string, args: string[]): string[] {
  return [pktLine(`command=${command}\n`), pktLine('agent=mesh-cli\n'), '0001', ...args.map(pktLine), '0000'];
}

function authError(where: string, status: number, detail?: string): MeshError {
  return new MeshError('E_AUTH', `${where} refused the operator credential (HTTP ${status}): it is wrong or missing${detail ? ` (${detail})` : ''}; `
    + `put the operator credential in the remote's URL (git remote set-url with http://operator:SECRET@host/...) or in a git credential helper`, { data: { status } });
}

/** `git credential fill|approve|reject` for the request URL `u` (which carries no credential). */
async function credential(dir: string, action: 'fill' | 'approve' | 'reject', u: URL, cred?: Credential): Promise<Credential> {
  const fields = [`protocol=${u.protocol.slice(0, -1)}`, `host=${u.host}`, `path=${u.pathname.replace(/^\//, '')}`];
  if (cred) fields.push(`username=${cred.username}`, `password=${cred.password}`);
  const out = (await gitBytes(dir, ['credential', action], fields.join('\n') + '\n\n')).toString('utf8');
  const get = (k: string) => out.split('\n').find((l) => l.startsWith(`${k}=`))?.slice(k.length + 1) ?? '';
  return { username: get('username'), password: get('password') };
}

/** The fallback: the git binary fetches into the checkout's object store, then one pack of the objects is read back. */
function gitRemote(dir: string, name: string): Remote {
  const remoteGit = (args: string[], input?: string) => gitBytes(dir, args, input).catch((e: unknown) => {
    throw new MeshError('E_FETCH', `cannot read remote '${name}' of ${dir}: ${messageOf(e)}`, { cause: e });
  });
  return {
    async lsRefs(prefixes) {
      const out = (await remoteGit(['ls-remote', name, ...prefixes.map((p) => `${p}*`)])).toString('utf8');
      const refs = new Map<string, string>();
      for (const line of out.split('\n')) {
        const [oid, ref] = line.split('\t');
        if (oid && ref && (prefixes.length === 0 || prefixes.some((p) => ref.startsWith(p)))) refs.set(ref, oid);
      }
      return refs;
    },
    async fetchObjects({ wants, haves = [], deepen }) {
      if (wants.length === 0) return new Map();
      // No --depth: on a full checkout it would write .git/shallow. The history of a local fleet is small.
      await remoteGit(['fetch', '--quiet', '--no-write-fetch-head', '--no-tags', '--stdin', name], wants.join('\n') + '\n');
      const commits = new Set(wants);
      let level = wants;
      for (let d = 1; deepen !== undefined && d < deepen && level.length > 0; d++) {
        const out = (await gitBytes(dir, ['rev-list', '--no-walk=unsorted', '--parents', '--ignore-missing', '--stdin'], level.join('\n') + '\n')).toString('utf8');
        level = [...new Set(out.split(/\s+/))].filter((oid) => oid && !commits.has(oid));
        for (const oid of level) commits.add(oid);
      }
      const objects = (revs: string[], walk: boolean) => gitBytes(dir, ['rev-list', '--objects', ...(walk ? [] : ['--no-walk']), '--ignore-missing', '--stdin'], revs.join('\n') + '\n');
      const lines = (out: Buffer) => out.toString('utf8').split('\n').filter(Boolean); // "oid [path]"
      let list: string[];
      if (deepen === undefined) list = lines(await objects([...commits, ...haves.map((h) => `^${h}`)], true));
      else {
        // --no-walk is ignored when a range is given, so what the haves hold is taken out here.
        const had = new Set(haves.length ? lines(await objects(haves, false)).map((l) => l.slice(0, 40)) : []);
        list = lines(await objects([...commits], false)).filter((l) => !had.has(l.slice(0, 40)));
      }
      return parsePack(await gitBytes(dir, ['pack-objects', '--stdout', '--delta-base-offset', '-q'], list.join('\n') + '\n'));
    },
  };
}
