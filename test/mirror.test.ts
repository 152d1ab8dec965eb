/**
 * Read mirrors (issue 22): a host enrolled with `token issue --mirror URL` polls and fetches main
 * from the mirror and pushes its reports to the fleet server; with the mirror down it reads from
 * the fleet server. Two real `mesh-cli serve` instances; the mirror is kept by `mesh-cli mirror sync`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd, newMachine, operatorUrl, startServer, type Server, type TestFleet } from './helpers/fleet.js';

const open: Array<TestFleet | Server> = [];
afterAll(async () => {
  for (const x of open.splice(0).reverse()) await ('close' in x ? x.close() : x.stop());
});

/** The request lines of a server's log (JSON), from line `from` on. */
function requests(server: Server, from = 0): Array<{ path: string; user: string | null; method: string }> {
  return server.stderr().split('\n').slice(from).flatMap((l) => {
    try {
      const o = JSON.parse(l) as { msg?: string; path?: string; user?: string | null; method?: string };
      return o.msg === 'request' && o.path ? [{ path: o.path, user: o.user ?? null, method: o.method ?? '' }] : [];
    } catch {
      return [];
    }
  });
}

const declaration = (port: number) => `resources:\n  - type: file\n    path: /etc/app.ini\n    content: "port = ${port}\\n"\n`;

describe('read mirrors', { timeout: 120_000 }, () => {
  it('a host reads main from its mirror, pushes its reports to the fleet server, and reads from the fleet server while the mirror is down', async () => {
    const fleet = await createFleet();
    open.push(fleet);
    const mirrorData = join(fleet.dir, 'mirror-data');
    mkdirSync(mirrorData);
    await git(mirrorData, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
    const mirror = await startServer(mirrorData, 0, { auth: true });
    open.push(mirror);
    const sync = async () => {
      const synced = await cli(fleet.checkout, 'mirror', 'sync', operatorUrl(mirror, mirror.operator!));
      expect(synced.code, synced.stderr).toBe(0);
      expect(synced.stdout).toContain('main at');
    };

    // A mirror URL that names no repository: git's own reason, not the last line of its advice, and exit 2 (a person's to fix), not 3.
    const wrong = await cli(fleet.checkout, 'mirror', 'sync', operatorUrl(mirror, mirror.operator!).replace(/fleet\.git$/, 'flet.git'), 'no-such-remote');
    expect(wrong.code, wrong.stderr).toBe(2);
    expect(wrong.stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/flet\.git: not synced: repository 'http:\/\/127\.0\.0\.1:\d+\/flet\.git\/' not found$/m);
    expect(wrong.stdout).toContain("no-such-remote: not synced: 'no-such-remote' does not appear to be a git repository");
    expect(wrong.stderr).toContain('fix what git said above, and run it again');

    const tokenFile = join(fleet.dir, 'web-1.token');
    const issued = await cli(fleet.checkout, 'token', 'issue', 'web-1', '--out', tokenFile, '--mirror', `${mirror.url}fleet.git`);
    expect(issued.code, issued.stderr).toBe(0);
    expect(readFileSync(tokenFile, 'utf8')).toContain(`${mirror.url}fleet.git`);
    await git(fleet.checkout, 'push', '--quiet');
    const first = await fleet.commit({ 'nodes/web-1/base.yaml': declaration(8001) }, 'web-1: app.ini');
    await sync();

    const root = newMachine(join(fleet.dir, 'machines', 'web-1'));
    mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
    writeFileSync(join(root, 'var/lib/dpkg/status'), ''); // a package database: the node is eligible
    const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
    expect(enrolled.code, enrolled.stderr + enrolled.stdout).toBe(0);
    expect(JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8')).mirrors).toEqual([`${mirror.url}fleet.git`]);

    // A pass: main from the mirror, the report to the fleet server.
    const [fromPrimary, fromMirror] = [requests(fleet.server).length, requests(mirror).length];
    const pass = await hostCmd(root, 'run', '--once');
    expect(pass.code, pass.stderr).toBe(0);
    expect(readFileSync(join(root, 'etc/app.ini'), 'utf8')).toBe('port = 8001\n');
    const mirrorSaw = requests(mirror, fromMirror).filter((r) => r.user === 'web-1');
    const primarySaw = requests(fleet.server, fromPrimary).filter((r) => r.user === 'web-1');
    expect(mirrorSaw.some((r) => r.path.endsWith('/git-upload-pack'))).toBe(true);
    expect(mirrorSaw.some((r) => r.path.includes('receive-pack'))).toBe(false);
    expect(primarySaw.some((r) => r.path.endsWith('/git-receive-pack'))).toBe(true);
    const applied = await cli(fleet.checkout, 'status', '--json');
    expect(JSON.parse(applied.stdout).nodes.find((n: { node: string }) => n.node === 'web-1')).toMatchObject({ commit: first, outcome: 'applied' });

    // A change the mirror has not been given yet: the host, reading the mirror, does not see it.
    const second = await fleet.commit({ 'nodes/web-1/base.yaml': declaration(8002) }, 'web-1: port 8002');
    const behind = await hostCmd(root, 'run', '--once');
    expect(behind.code, behind.stderr).toBe(0);
    expect(readFileSync(join(root, 'etc/app.ini'), 'utf8')).toBe('port = 8001\n');

    // The mirror goes down: the change is read from the fleet server.
    await mirror.stop();
    const without = await hostCmd(root, 'run', '--once');
    expect(without.code, without.stderr).toBe(0);
    expect(readFileSync(join(root, 'etc/app.ini'), 'utf8')).toBe('port = 8002\n');
    const status = await cli(fleet.checkout, 'status', '--json');
    expect(JSON.parse(status.stdout).nodes.find((n: { node: string }) => n.node === 'web-1')).toMatchObject({ commit: second, outcome: 'applied' });
    expect(existsSync(tokenFile)).toBe(false); // enrolment deleted the token file, as ever
  });
});
