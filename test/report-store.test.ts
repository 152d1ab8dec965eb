/**
 * mesh-cli/status/git-remote.ts against the real `git http-backend` behind `mesh-cli serve`:
 * report branches whose files git stores as deltas, listed with `git ls-remote`, fetched by id
 * into the report store and read with one `git cat-file --batch`, compared byte for byte with
 * what the server has; the checkout itself never becomes shallow; and the same for a local path.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MeshError } from '../core/errors.js';
import { openRemote as openStore, type GitObject, type Remote } from '../mesh-cli/status/git-remote.js';
import { createFleet, type TestFleet } from './helpers/fleet.js';

const ID = { GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' };
const gitSync = (dir: string, args: string[], input?: string | Buffer): Buffer =>
  execFileSync('git', ['-C', dir, ...args], { input, env: { ...process.env, ...ID }, maxBuffer: 64 << 20 });
const text = (dir: string, ...args: string[]) => gitSync(dir, args).toString('utf8').trim();

let fleet: TestFleet;
let bare: string;
/** branch name → its commits, oldest first */
const history: Record<string, string[]> = {};
const opened: Remote[] = [];

/** The report store of the checkout at `dir` (beside its report index), closed after each test. */
async function openRemote(dir: string): Promise<Remote> {
  const remote = await openStore(dir, { store: join(dir, '.git', 'mesh'), config: join(dir, '.git', 'config') });
  opened.push(remote);
  return remote;
}

/** ~50 KB of text that each branch and each commit changes a little, so that git stores deltas. */
function report(branch: string, n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < 800; i++) lines.push(`line ${i}: ${i % 97 === n ? `changed by ${branch} in commit ${n}` : 'the quick brown fox jumps over the lazy dog'}`);
  return lines.join('\n') + '\n';
}

beforeAll(async () => {
  process.env.GIT_TERMINAL_PROMPT = '0'; // `git credential fill` must fail, not ask, when no helper knows the answer
  fleet = await createFleet();
  bare = join(fleet.server.data, 'fleet.git');
  for (const branch of ['a', 'b', 'c']) {
    const commits: string[] = [];
    for (let n = 0; n < 4; n++) {
      const blob = gitSync(bare, ['hash-object', '-w', '--stdin'], report(branch, n)).toString().trim();
      const small = gitSync(bare, ['hash-object', '-w', '--stdin'], JSON.stringify({ node: branch, n }) + '\n').toString().trim();
      const tree = gitSync(bare, ['mktree'], `100644 blob ${blob}\tstatus.json\n100644 blob ${small}\tstatus.json.sig\n`).toString().trim();
      const parent = commits.length ? ['-p', commits.at(-1)!] : [];
      commits.push(gitSync(bare, ['commit-tree', tree, ...parent, '-m', `${branch} ${n}`]).toString().trim());
    }
    text(bare, 'update-ref', `refs/heads/reports/${branch}`, commits.at(-1)!);
    history[branch] = commits;
  }
  text(bare, 'repack', '-adfq', '--depth=50', '--window=250'); // the served pack holds OFS_DELTA entries
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  await fleet?.close();
});

const tips = () => ['a', 'b', 'c'].map((b) => history[b]!.at(-1)!);

/** What git itself has for `oids`: every object, raw, by oid. */
function gitObjects(oids: string[]): Map<string, GitObject> {
  const out = gitSync(bare, ['cat-file', '--batch'], oids.join('\n') + '\n');
  const objects = new Map<string, GitObject>();
  let at = 0;
  for (const oid of oids) {
    const eol = out.indexOf(10, at);
    const [, type, size] = out.toString('latin1', at, eol).split(' ');
    objects.set(oid, { type: type as GitObject['type'], data: Buffer.from(out.subarray(eol + 1, eol + 1 + Number(size))) });
    at = eol + 2 + Number(size);
  }
  return objects;
}

/** The objects `git rev-list --objects ARGS` names. */
function revList(...args: string[]): string[] {
  return text(bare, 'rev-list', '--objects', ...args).split('\n').map((l) => l.slice(0, 40)).sort();
}

/** The server's requests as "METHOD path status", in order. */
const served = () => fleet.server.stderr().split('\n').flatMap((l) => {
  try {
    const r = JSON.parse(l.slice(l.indexOf('{'))) as { msg?: string; method?: string; path?: string; status?: number };
    return r.method && r.path ? [`${r.method} ${r.path} ${r.status}`] : [];
  } catch {
    return [];
  }
});
/** How many requests the server has logged, once no more come in (it logs each as its answer ends, and they reach this process as its event loop turns). */
async function settled(): Promise<number> {
  let seen = -1;
  while (served().length !== seen) {
    seen = served().length;
    await new Promise((r) => setTimeout(r, 100));
  }
  return seen;
}

/** The requests served after the first `from`, once there are `count` (the server logs each as its answer ends). */
async function servedSince(from: number, count: number): Promise<string[]> {
  for (let i = 0; i < 100 && served().length < from + count; i++) await new Promise((r) => setTimeout(r, 20));
  return served().slice(from);
}
const lsRemoteHeads = (dir: string) => Object.fromEntries(text(dir, 'ls-remote', '--heads', 'origin').split('\n').map((l) => l.split('\t').reverse()));
const plain = (m: Map<string, GitObject>) => new Map([...m].map(([oid, o]) => [oid, { type: o.type, data: o.data.toString('latin1') }]));

describe('reading report branches through the git binary over smart HTTP', () => {
  it('lists exactly the refs under the prefixes asked for, in one request from the process (git\'s ref advertisement)', async () => {
    const heads = lsRemoteHeads(fleet.checkout);
    const main = text(bare, 'rev-parse', 'refs/heads/main');
    const before = await settled();
    const remote = await openRemote(fleet.checkout);
    const reports = Object.fromEntries(['a', 'b', 'c'].map((b) => [`refs/heads/reports/${b}`, history[b]!.at(-1)!]));
    expect(Object.fromEntries(await remote.lsRefs(['refs/heads/reports/']))).toEqual(reports);
    expect(Object.fromEntries(await remote.lsRefs(['refs/heads/reports/', 'refs/heads/main']))).toEqual({ ...reports, 'refs/heads/main': main });
    expect(Object.fromEntries(await remote.lsRefs(['refs/heads/']))).toEqual(heads);
    // `git ls-remote` would have made two requests each (protocol v2: the advertisement, then ls-refs).
    expect(await servedSince(before, 3)).toEqual(Array(3).fill('GET /fleet.git/info/refs 200'));
  });

  it('lists through `git ls-remote` where a request from the process would not be the one git makes', async () => {
    const dir = mkdtempSync(join(fleet.dir, 'extra-header-'));
    text(dir, 'init', '-q');
    text(dir, 'remote', 'add', 'origin', fleet.repoUrl);
    text(dir, 'config', 'http.extraHeader', 'X-Test: 1');
    const heads = lsRemoteHeads(fleet.checkout);
    const before = await settled();
    expect(Object.fromEntries(await (await openRemote(dir)).lsRefs(['refs/heads/']))).toEqual(heads);
    await settled();
    expect(served().slice(before)).toContain('POST /fleet.git/git-upload-pack 200'); // git's ls-refs command (protocol v2)
  });

  it('fetches each tip with its tree and blobs at depth 1, byte-equal to what git has, and the checkout does not become shallow', async () => {
    const remote = await openRemote(fleet.checkout);
    const got = await remote.fetchObjects({ wants: tips(), deepen: 1 });
    const want = revList('--no-walk', ...tips());
    expect([...got.keys()].sort()).toEqual(want);
    expect(want).toHaveLength(3 * 4); // commit, tree and two blobs per branch; no parent
    expect(plain(got)).toEqual(plain(gitObjects(want)));
    expect(existsSync(join(fleet.checkout, '.git', 'shallow'))).toBe(false);
    expect(() => gitSync(fleet.checkout, ['cat-file', '-e', tips()[0]!], '')).toThrow(); // in the report store, not the checkout's
    // the throwaway git dir of the fetch is gone; what it fetched is read again without the network
    expect(readdirSync(join(fleet.checkout, '.git', 'mesh')).filter((f) => f.startsWith('fetch-'))).toEqual([]);
    const again = await (await openRemote(fleet.checkout)).readObjects({ wants: tips(), deepen: 1 });
    expect(plain(again)).toEqual(plain(got));
  });

  it('a run at work keeps what it fetched when another run in the same checkout empties the store', async () => {
    const first = await openRemote(fleet.checkout);
    await first.fetchTips({ wants: tips(), deepen: 1 }); // fetched, not read yet
    const store = realpathSync(join(fleet.checkout, '.git', 'mesh', 'reports.git'));
    for (let i = 0; i < 41; i++) writeFileSync(join(store, 'objects', 'pack', `pack-full-${i}.pack`), ''); // over the limit: the next run empties it
    const second = await openRemote(fleet.checkout);
    expect(await second.readObjects({ wants: tips(), deepen: 1 })).toEqual(new Map()); // a new, empty store
    const got = await first.readObjects({ wants: tips(), deepen: 1 });
    expect([...got.keys()].sort()).toEqual(revList('--no-walk', ...tips()));
  });

  it('fetches whole histories, their files stored as deltas on the server', async () => {
    const got = await (await openRemote(fleet.checkout)).fetchObjects({ wants: tips() });
    const want = revList(...tips());
    expect([...got.keys()].sort()).toEqual(want);
    expect(plain(got)).toEqual(plain(gitObjects(want)));
  });

  it('leaves out what the haves already hold', async () => {
    const [, , second, tip] = history.a!;
    const got = await (await openRemote(fleet.checkout)).fetchObjects({ wants: [tip!], haves: [second!] });
    expect([...got.keys()].sort()).toEqual(revList(tip!, `^${second}`));
    expect(got.has(second!)).toBe(false);
    expect(got.has(text(bare, 'rev-parse', `${second}:status.json.sig`))).toBe(false);
    // A commit below a branch's tip (status asks for a new tip's parent to check the chain in between).
    const [first, , third] = history.b!;
    const between = await (await openRemote(fleet.checkout)).fetchObjects({ wants: [third!], haves: [first!] });
    expect([...between.keys()].sort()).toEqual(revList(third!, `^${first}`));
  });

  it('asks git credential helpers when the URL has no credential, and says E_AUTH when none knows it', async () => {
    const dir = mkdtempSync(join(fleet.dir, 'helper-'));
    text(dir, 'init', '-q');
    text(dir, 'remote', 'add', 'origin', fleet.plainUrl);
    process.env.GIT_CONFIG_GLOBAL = join(dir, 'no-global-config'); // no helper of the machine's answers
    try {
      await expect((await openRemote(dir)).lsRefs(['refs/heads/main'])).rejects.toMatchObject({ code: 'E_AUTH' });
      const store = join(dir, 'credentials');
      writeFileSync(store, `${fleet.repoUrl.replace(/\/fleet\.git$/, '')}\n`);
      text(dir, 'config', 'credential.helper', `store --file=${store}`);
      const refs = await (await openRemote(dir)).lsRefs(['refs/heads/main']);
      expect([...refs.keys()]).toEqual(['refs/heads/main']);
    } finally {
      delete process.env.GIT_CONFIG_GLOBAL;
    }
  });

  it('refuses a wrong credential with E_AUTH, naming the remote and never the secret', async () => {
    const dir = mkdtempSync(join(fleet.dir, 'wrong-'));
    text(dir, 'init', '-q');
    text(dir, 'remote', 'add', 'origin', fleet.repoUrl.replace(fleet.operator, 'not-the-s3cret'));
    const remote = await openRemote(dir);
    const err = await remote.fetchObjects({ wants: tips(), deepen: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MeshError);
    expect(err).toMatchObject({ code: 'E_AUTH', next: 'human' });
    expect((err as Error).message).toContain(`remote 'origin' (${fleet.plainUrl})`);
    expect((err as Error).message).not.toContain('not-the-s3cret');
  });

  // Asked directly, a refusal is said without git; through git (here because of an extra header, as behind a proxy), git runs
  // without credential helpers: either way, the helper keeps the credential it holds, which was never tried.
  it.each([['directly', false], ['through git', true]])('refuses a wrong password in the URL %s, so that a credential helper keeps the credential it holds', async (_, throughGit) => {
    const dir = mkdtempSync(join(fleet.dir, 'keep-'));
    text(dir, 'init', '-q');
    text(dir, 'remote', 'add', 'origin', fleet.repoUrl.replace(fleet.operator, 'not-the-s3cret'));
    if (throughGit) text(dir, 'config', 'http.extraHeader', 'X-Test: 1');
    process.env.GIT_CONFIG_GLOBAL = join(dir, 'no-global-config'); // no helper of the machine's answers
    try {
      const store = join(dir, 'credentials');
      const kept = `${fleet.repoUrl.replace(/\/fleet\.git$/, '')}\n`;
      writeFileSync(store, kept);
      text(dir, 'config', 'credential.helper', `store --file=${store}`);
      for (const asked of [(r: Remote) => r.lsRefs(['refs/heads/main']), (r: Remote) => r.fetchObjects({ wants: tips(), deepen: 1 })]) {
        const err = await asked(await openRemote(dir)).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: 'E_AUTH', next: 'human' });
        expect((err as Error).message).toContain(`remote 'origin' (${fleet.plainUrl})`);
        expect((err as Error).message).not.toContain('not-the-s3cret');
        expect(readFileSync(store, 'utf8')).toBe(kept);
      }
      // The helper still answers where the URL has no password.
      text(dir, 'remote', 'set-url', 'origin', fleet.plainUrl);
      expect([...(await (await openRemote(dir)).lsRefs(['refs/heads/main'])).keys()]).toEqual(['refs/heads/main']);
    } finally {
      delete process.env.GIT_CONFIG_GLOBAL;
    }
  });

  it('says E_NO_REMOTE, a person\'s to fix, when the checkout has no origin', async () => {
    const dir = mkdtempSync(join(fleet.dir, 'no-origin-'));
    text(dir, 'init', '-q');
    const err = await (await openRemote(dir)).lsRefs(['refs/heads/']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'E_NO_REMOTE', next: 'human' });
    expect((err as Error).message).toContain("this checkout has no remote 'origin': add the fleet server's repository with 'git remote add origin ");
  });

  it('says E_FETCH with the URL when nothing listens there', async () => {
    const dir = mkdtempSync(join(fleet.dir, 'down-'));
    text(dir, 'init', '-q');
    text(dir, 'remote', 'add', 'origin', 'http://operator:s3cret@127.0.0.1:1/fleet.git');
    const err = await (await openRemote(dir)).lsRefs(['refs/heads/']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'E_FETCH', next: 'retry' });
    expect((err as Error).message).toContain('http://127.0.0.1:1/fleet.git');
    expect((err as Error).message).not.toContain('s3cret');
  });
});

describe('report commits by id from mesh-cli serve (server/report-pack.ts)', () => {
  const post = (body: string, auth: string | null, method = 'POST') =>
    fetch(`${fleet.plainUrl}/mesh/report-pack`, { method, ...(method === 'POST' ? { body } : {}), headers: auth ? { Authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {} });
  const requests = () => fleet.server.stderr().split('\n').filter((l) => l.includes('/mesh/report-pack'));

  it('are what status fetches one commit deep: the same objects as git\'s, in one request', async () => {
    const before = requests().length;
    const got = await (await openRemote(fleet.checkout)).fetchObjects({ wants: tips(), deepen: 1 });
    expect(plain(got)).toEqual(plain(gitObjects(revList('--no-walk', ...tips()))));
    const made = requests().slice(before);
    expect(made).toHaveLength(1);
    expect(made[0]).toContain('"status":200');
  });

  it('are an operator\'s to read: a node, a stranger, a bad body and a commit the repository lacks are refused', async () => {
    const root = await fleet.enrol('rp-1');
    const credential = JSON.parse(readFileSync(join(root, 'etc/mesh-host/credential.json'), 'utf8')) as { username: string; password: string };
    const body = tips().join('\n') + '\n';
    const pack = await post(body, `operator:${fleet.operator}`);
    expect(pack.status).toBe(200);
    expect(Buffer.from(await pack.arrayBuffer()).subarray(0, 4).toString()).toBe('PACK');
    expect((await post(body, `${credential.username}:${credential.password}`)).status).toBe(403);
    expect((await post(body, null)).status).toBe(401);
    expect((await post('not an id\n', `operator:${fleet.operator}`)).status).toBe(400);
    expect((await post(`${'1'.repeat(40)}\n`, `operator:${fleet.operator}`)).status).toBe(422);
    const tree = text(bare, 'rev-parse', `${tips()[0]}^{tree}`).trim();
    expect((await post(`${tips()[0]}\n${tree}\n`, `operator:${fleet.operator}`)).status).toBe(422); // a commit and a tree: refused as a whole
    expect((await post('', `operator:${fleet.operator}`, 'GET')).status).toBe(405);
    text(bare, 'update-ref', '-d', 'refs/heads/reports/rp-1'); // the other tests know three report branches
  });

  it('stop packing when the client goes away: no pack-objects is left blocked on a full pipe', async () => {
    // A commit whose pack is larger than the pipes and socket buffers between pack-objects and the client.
    const blob = gitSync(bare, ['hash-object', '-w', '--stdin'], randomBytes(4 << 20)).toString().trim();
    const commit = gitSync(bare, ['commit-tree', gitSync(bare, ['mktree'], `100644 blob ${blob}\tstatus.json\n`).toString().trim(), '-m', 'large']).toString().trim();
    const packing = () => readdirSync('/proc').filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        return cmd.includes('pack-objects') && cmd.includes(bare) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
      } catch {
        return false; // gone meanwhile
      }
    });
    const first = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${fleet.plainUrl}/mesh/report-pack`, { method: 'POST', headers: { Authorization: `Basic ${Buffer.from(`operator:${fleet.operator}`).toString('base64')}` } }, (res) => {
        res.once('data', (chunk: Buffer) => {
          resolve(chunk.length);
          req.destroy(); // gone after the first bytes, as a status stopped mid-fetch
        });
      });
      req.on('error', () => undefined);
      req.once('response', (res) => { if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`)); });
      req.end(`${commit}\n`);
    });
    expect(first).toBeGreaterThan(0);
    const end = Date.now() + 5000;
    while (packing().length > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(packing()).toEqual([]);
  });
});

describe('a remote on a local path, through the git binary', () => {
  it('lists and fetches the same as over HTTP', async () => {
    const dir = mkdtempSync(join(fleet.dir, 'local-'));
    text(dir, 'init', '-q');
    text(dir, 'remote', 'add', 'origin', bare);
    const remote = await openRemote(dir);
    const refs = await remote.lsRefs(['refs/heads/reports/']);
    expect([...refs.values()].sort()).toEqual(tips().sort());
    const got = await remote.fetchObjects({ wants: tips(), deepen: 1 });
    expect(plain(got)).toEqual(plain(gitObjects(revList('--no-walk', ...tips()))));
    const [first, second] = history.b!;
    const two = await remote.fetchObjects({ wants: [second!], deepen: 2 });
    expect([...two.keys()].sort()).toEqual(revList('--no-walk', second!, first!));
    const newer = await remote.fetchObjects({ wants: [history.b!.at(-1)!], haves: [second!] });
    expect([...newer.keys()].sort()).toEqual(revList(history.b!.at(-1)!, `^${second}`));
    const below = await remote.fetchObjects({ wants: [history.b!.at(-2)!], haves: [first!] });
    expect([...below.keys()].sort()).toEqual(revList(history.b!.at(-2)!, `^${first}`));
    const tipOnly = await remote.fetchObjects({ wants: [history.b!.at(-1)!], haves: [history.b!.at(-2)!], deepen: 1 });
    const had = new Set(revList('--no-walk', history.b!.at(-2)!));
    expect([...tipOnly.keys()].sort()).toEqual(revList('--no-walk', history.b!.at(-1)!).filter((oid) => !had.has(oid)));
  });
});
