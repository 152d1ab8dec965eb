// Bench phase 1: a fleet of real simulated hosts. Every number here comes from the host code
// paths themselves (poll, fetch, declaration load, report sign + commit + push) run by N hosts
// in this process against `mesh-cli serve`; the server's CPU is read from /proc.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { commitFiles, git, measured, nodeNames, perOp, pool, progress } from './bench-fleet-lib.mjs';

const FIFTEEN_MIN = 15 * 60_000;
/** Hosts working at the same moment when the fleet is spread over its interval (jitter), rather than all at once. */
const SPREAD = 32;
/** Hosts that go on after the first push and poll: changed poll, reports, heartbeats (per-host figures need no more). */
const SAMPLE = 100;

/** Run phase 1 with `n` hosts in `work`, served by `server` from `bare`. */
export async function realFleet(sim, { n, work, bare, server, statusRun }) {
  const names = nodeNames(n);
  const keys = names.map((name) => sim.nodeKeys(name));
  const now = new Date();
  const files = { 'mesh.yaml': 'name: bench\nmainBranch: main\ntrust: none\nsigners: []\n' };
  for (const k of keys) Object.assign(files, { [`nodes/${k.node}/node.yaml`]: sim.identityYaml(k, now), [`nodes/${k.node}/base.yaml`]: sim.declarationYaml(k.node) });
  commitFiles(bare, files, `fleet: ${n} nodes`);
  const url = `${server.url}fleet.git`;

  progress(`phase 1: ${n} hosts`);
  const template = join(work, 'template');
  const firstFetch = await sim.fetchTemplate(template, url, keys[0]);
  const hosts = await pool(keys, 32, (k) => sim.SimHost.open(join(work, 'hosts', k.node), url, k, { template }));
  const meters = () => hosts.map((h) => h.meter());
  const out = { nodes: n, firstFetch: { requests: firstFetch.requests, bytes: firstFetch.sent + firstFetch.received } };

  // contact: the first poll finds main where the template left it.
  let before = meters();
  const contacts = await pool(hosts, Infinity, (h) => h.contact());
  out.noopPollEmpty = { ...perOp(before, meters()), reportRefs: 0 };

  progress('every host pushes its first report at once');
  // report: every host pushes its first report at the same moment. No retries: a failure is a lost report.
  before = meters();
  const push = await measured(server, () => Promise.all(hosts.map((h, i) => h.report(contacts[i].body, now).then(() => null, (e) => `${h.node}: ${e.message}`))));
  const lost = push.result.filter(Boolean);
  const onServer = new Map(git(bare, ['for-each-ref', '--format=%(refname:lstrip=3) %(objectname)', 'refs/heads/reports/']).split('\n').filter(Boolean).map((l) => l.split(' ')));
  const tips = await Promise.all(hosts.map((h) => h.tip()));
  const landed = hosts.filter((h, i) => onServer.get(h.node) === tips[i]).length;
  out.pushAtOnce = { ...perOp(before, meters()), landed, lost: lost.length, retries: 0, errors: lost.slice(0, 5), wallS: push.wallS, serverCpuS: push.serverCpuS, serverCpuPerPushS: push.serverCpuS / n };

  progress('no-op polls, all at once');
  // no-op poll, now that the server holds a report branch per node.
  before = meters();
  const noop = await measured(server, () => Promise.all(hosts.map((h) => h.repo.poll('main'))));
  out.noopPoll = { ...perOp(before, meters()), reportRefs: onServer.size, wallS: noop.wallS, serverCpuS: noop.serverCpuS, serverCpuPerPollS: noop.serverCpuS / n };

  // changed poll: one node's declaration changes; every host polls, fetches and reads its own folder,
  // SPREAD at a time (all at once, 1,000 fetches overrun a 2-core server: see docs/scale.md).
  progress(`changed polls of ${SAMPLE} hosts, ${SPREAD} at a time`);
  const sample = hosts.slice(0, SAMPLE);
  const sampleMeters = () => sample.map((h) => h.meter());
  const parent = git(bare, ['rev-parse', 'main']);
  commitFiles(bare, { [`nodes/${names[0]}/base.yaml`]: sim.declarationYaml(names[0], 1) }, `${names[0]}: revision 1`, parent);
  before = sampleMeters();
  const changed = await measured(server, () => pool(sample, SPREAD, (h) => h.contact()));
  out.changedPoll = { ...perOp(before, sampleMeters()), moved: changed.result.filter((c) => c.moved).length, wallS: changed.wallS, serverCpuS: changed.serverCpuS, serverCpuPerPollS: changed.serverCpuS / sample.length };

  // operator checkout, then two heartbeat rounds: the first stacks on the real report, the second replaces it.
  const checkout = join(work, 'operator');
  mkdirSync(checkout);
  git(work, ['clone', '--quiet', `${server.operatorUrl}fleet.git`, checkout]);
  out.statusCold = await statusRun(checkout, n); // builds the checkout's report index
  const heartbeat = async (at) => {
    before = sampleMeters();
    progress(`reports of ${SAMPLE} hosts at ${at.toISOString()}, ${SPREAD} at a time`);
    const r = await measured(server, () => pool(sample, SPREAD, (h, i) => h.report(changed.result[i].body, at).then((x) => x.heartbeat, () => null)));
    return { ...perOp(before, sampleMeters()), heartbeats: r.result.filter((x) => x === true).length, lost: r.result.filter((x) => x === null).length, wallS: r.wallS, serverCpuS: r.serverCpuS, serverCpuPerPushS: r.serverCpuS / sample.length };
  };
  // The change above is a real report for every host (new commit): send it first, then the heartbeats.
  out.changedReport = await heartbeat(new Date(now.getTime() + 60_000));
  out.heartbeatStack = await heartbeat(new Date(now.getTime() + FIFTEEN_MIN));
  progress('mesh-cli status');
  out.status = await statusRun(checkout, n); // reports changed since the operator's last fetch
  out.heartbeatReplace = await heartbeat(new Date(now.getTime() + 2 * FIFTEEN_MIN));
  out.historyPerNode = Number(git(bare, ['rev-list', '--count', `refs/heads/reports/${names[1]}`]));
  return out;
}
