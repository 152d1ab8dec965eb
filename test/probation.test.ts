/**
 * A new host version on probation (upgrade/upgrade.ts) is rolled back when it completes no pass
 * within it: a version that hangs. A pass that fails because the machine refused a write (a full
 * or read-only /var) says nothing of the version, as a fleet outage says nothing: its probation
 * starts again with the next pass, and a good version is not rolled back and refused for it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFleet, MESH_HOST, runProgram, type TestFleet } from './helpers/fleet.js';

let fleet: TestFleet;
beforeAll(async () => {
  fleet = await createFleet();
}, 60_000);
afterAll(async () => {
  await fleet?.close();
});

describe('the probation of a new host version', { timeout: 60_000 }, () => {
  it('a read-only state folder fails every pass, and the version on probation stays up instead of exiting for rollback', async () => {
    const root = await fleet.enrol('web-1');
    const state = join(root, 'var/lib/mesh-host');
    const version = (await runProgram('node', [MESH_HOST, '--version'], root)).stdout.trim();
    writeFileSync(join(state, 'upgrade.json'), JSON.stringify({ pending: { from: '0.0.1', to: version, at: new Date().toISOString() } }));
    // The state folder bound read-only onto itself, in a mount namespace that ends with the host; `timeout` stops a host still up after 4 s (124).
    const script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec timeout 4 node "$2" run --interval 300ms --root "$3"';
    const r = await runProgram('unshare', ['--mount', 'sh', '-c', script, 'sh', state, MESH_HOST, root], root, { MESH_HOST_PROBATION: '1s', MESH_LOG_LEVEL: 'warn' });
    expect(r.code, r.stderr).toBe(124);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; why?: string; err?: string });
    expect(lines.filter((l) => l.msg.includes('exiting for rollback'))).toEqual([]);
    expect(lines.filter((l) => l.msg === 'reconcile pass failed').length).toBeGreaterThanOrEqual(2);
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'this pass failed for a cause outside this new host version: its probation starts again with the next pass', why: 'this machine refused a write: the filesystem it was writing to is read-only' }));
  });
});
