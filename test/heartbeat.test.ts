/** Heartbeats through the real host: a report that says nothing new replaces the heartbeat before it, and status still verifies the chain. */
import { expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd } from './helpers/fleet.js';

it('a heartbeat replaces the previous heartbeat while every real report is kept, and the chain stays ok', async () => {
  const fleet = await createFleet();
  try {
    const root = await fleet.enrol('hb-1');
    await fleet.commit({ 'nodes/hb-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/hb\n    content: "x\\n"\n' }, 'hb');
    // status between passes too: it checks each new tip against the one it saw before it,
    // and a heartbeat that replaced the heartbeat it saw descends from that one's parent.
    for (let i = 0; i < 4; i++) {
      const r = await hostCmd(root, 'run', '--once', '--heartbeat', '1ms');
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const row = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0];
      expect(row).toMatchObject({ node: 'hb-1', signature: 'valid', outcome: 'applied', chain: 'ok', sequence: i + 2 });
    }
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    const log = (await git(fleet.checkout, 'log', '--format=%s', 'origin/reports/hb-1')).split('\n');
    // #1 enrolment and #2 the apply are real; #3 is the first heartbeat; #4 was replaced by #5.
    expect(log.map((s) => s.split(':')[0])).toEqual(['report hb-1 #5', 'report hb-1 #3', 'report hb-1 #2', 'report hb-1 #1']);
  } finally {
    await fleet.close();
  }
});
