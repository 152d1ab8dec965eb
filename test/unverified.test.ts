/**
 * The outcome `unverified` through the real host and server: a pass whose resources all converged
 * but where a check could not be made (a service's running state on a machine with no running
 * systemd) is never counted as applied — not in the host's own output, not in `status`, not in a
 * commit's rollout — and a check that could not be made is not a change, so the next such pass is
 * nothing new to report.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { cli, createFleet, hostCmd } from './helpers/fleet.js';

const UNIT = '[Unit]\nDescription=demo\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n';

it('an unverified pass is shown as such in the host, status (exit 1) and the rollout, never as applied, and is no change the next time', async () => {
  const fleet = await createFleet();
  try {
    const web1 = await fleet.enrol('web-1');
    const web2 = await fleet.enrol('web-2');
    mkdirSync(join(web1, 'etc/systemd/system'), { recursive: true });
    writeFileSync(join(web1, 'etc/systemd/system/demo.service'), UNIT);
    const commit = await fleet.commit({
      'nodes/web-1/base.yaml': 'resources:\n  - type: service\n    name: demo\n    enabled: true\n    running: true\n',
      'nodes/web-2/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "hi\\n"\n',
    }, 'demo service on web-1, motd on web-2');
    const first = await hostCmd(web1, 'run', '--once', '--json');
    expect(first.code, first.stderr).toBe(0); // everything it could check is as it should be
    expect(JSON.parse(first.stdout)).toMatchObject({ outcome: 'unverified', counts: { changed: 1, failed: 0 }, delivery: 'pushed' });
    expect((await hostCmd(web2, 'run', '--once')).code).toBe(0);

    // The next pass changes nothing and says so; the one after it says nothing new, so it sends nothing.
    expect(JSON.parse((await hostCmd(web1, 'run', '--once', '--json')).stdout)).toMatchObject({ outcome: 'unverified', counts: { changed: 0, unchanged: 0 } });
    const again = JSON.parse((await hostCmd(web1, 'run', '--once', '--json')).stdout);
    expect(again).toMatchObject({ outcome: 'unverified', counts: { changed: 0 }, delivery: 'unchanged' });
    expect(again.resources).toEqual([{ id: 'service:demo', result: 'unverified', error: 'no running systemd under this root: running=true not verified' }]);

    const status = await cli(fleet.checkout, 'status', '--json');
    expect(status.code).toBe(1); // not applied, and waiting will not make it so
    const rows = JSON.parse(status.stdout).nodes;
    expect(rows.find((r: { node: string }) => r.node === 'web-1')).toMatchObject({ outcome: 'unverified', unchecked: ['service:demo: no running systemd under this root: running=true not verified'] });
    expect(JSON.parse(status.stdout).summary).toMatch(/^2 nodes: 1 applied, 1 unverified;/);
    const table = (await cli(fleet.checkout, 'status')).stdout;
    expect(table).toMatch(/^web-1 .* unverified +/m);
    expect(table).toContain('web-1: not checked: service:demo: no running systemd under this root: running=true not verified');

    const page = join(fleet.dir, 'page.html');
    expect((await cli(fleet.checkout, 'status', '--html', page)).code).toBe(1);
    expect(readFileSync(page, 'utf8')).toMatch(/<tr class="problem unverified"><td>web-1<\/td>.*<div class="detail">not checked: service:demo: no running systemd under this root: running=true not verified<\/div>/);

    const rollout = await cli(fleet.checkout, 'status', '--commit', commit, '--json');
    expect(rollout.code).toBe(1);
    const json = JSON.parse(rollout.stdout);
    expect(json.applied.map((a: { node: string }) => a.node)).toEqual(['web-2']);
    expect(json.unverified).toMatchObject([{ node: 'web-1', commit, unchecked: ['service:demo: no running systemd under this root: running=true not verified'] }]);
    expect(json.failed).toEqual([]);
    expect(json.outstanding).toEqual([]);
    const text = (await cli(fleet.checkout, 'status', '--commit', commit)).stdout;
    expect(text).toContain('2 nodes affected: 1 applied, 1 unverified, 0 failed, 0 outstanding');
    expect(text).toMatch(/^unverified +web-1 +at [0-9a-f]{12}: converged, but not every check could be made there$/m);
  } finally {
    await fleet.close();
  }
}, 120_000);
