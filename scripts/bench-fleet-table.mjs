// The tables `npm run bench:fleet` prints: one row per measure, one column per fleet.
import { burstRows } from './bench-fleet-burst.mjs';
import { layoutRows } from './bench-fleet-layout.mjs';

const kb = (b) => (b === undefined ? '-' : b < 10_240 ? `${(b / 1024).toFixed(2)} KB` : b < 10_485_760 ? `${(b / 1024).toFixed(0)} KB` : `${(b / 1048576).toFixed(1)} MB`);
const op = (o) => (o ? `${fmt(o.requests)} req, ${kb(o.bytes)}` : '-');
const s = (x, digits = 2) => (x === undefined || Number.isNaN(x) ? '-' : `${x.toFixed(digits)} s`);
const ms = (x) => (x === undefined ? '-' : `${Math.round(x)} ms`);
// Wall and CPU of the whole process, then the phases of its report-index refresh (report-index.ts).
const statusLine = (x) => (x ? `${s(x.totalS)} wall, ${s(x.cpuS)} CPU, ${x.valid}/${x.nodes} valid, chain ok ${x.chainOk}${x.timings ? `; ${Object.entries(x.timings.phases).map(([k, v]) => `${k} ${ms(v)}`).join(', ')} (${x.timings.changed} changed)` : ''}` : '-');
// A status run's wall, its CPU and the machine probe timed just before it (bench-fleet.mjs machineProbe: lower is faster).
const eachRun = (x) => `${s(x.totalS)} (${s(x.cpuS, 1)}${x.probeMs === undefined ? '' : `; ${ms(x.probeMs)}`})`;
const fmt = (x) => (Number.isInteger(x) ? String(x) : x.toFixed(2));

/** Print the results of scripts/bench-fleet.mjs as a table. */
export function printTable(r) {
  const a = r.real ?? {};
  const b = r.big ?? {};
  const p = b.plain ?? {};
  const h = b.hidden ?? {};
  const rows = [
    ['', `${a.nodes ?? '-'} nodes, real hosts, mesh-cli serve`, `${b.nodes ?? '-'} nodes, ${h.noopPoll?.hosts ?? '-'} sample hosts, mesh-cli serve`, `${b.nodes ?? '-'} nodes, ${p.noopPoll?.hosts ?? '-'} hosts, serve --open (no hiding)`],
    ['first fetch (shallow main)', op(a.firstFetch), op(h.firstFetch), op(p.firstFetch)],
    ['no-op poll, per host', op(a.noopPoll), op(h.noopPoll), op(p.noopPoll)],
    ['  report branches on the server', String(a.noopPoll?.reportRefs ?? '-'), String(b.nodes ?? '-'), String(b.nodes ?? '-')],
    ['  no-op poll with 0 report branches', op(a.noopPollEmpty), '', ''],
    ['changed poll (poll + fetch), per host', op(a.changedPoll), op(h.changedPoll), op(p.changedPoll)],
    ['report push, per host', op(a.pushAtOnce), op(h.push), op(p.push)],
    ['heartbeat push (stacks on the real report)', op(a.heartbeatStack), '', ''],
    ['heartbeat push (replaces the last heartbeat)', op(a.heartbeatReplace), '', ''],
    ['server CPU for a first fetch', '', s(h.firstFetch?.serverCpuS, 2), s(p.firstFetch?.serverCpuS, 2)],
    ['server CPU per no-op poll', s(a.noopPoll?.serverCpuPerPollS, 3), s(h.noopPoll?.serverCpuPerPollS, 3), s(p.noopPoll?.serverCpuPerPollS, 3)],
    ['server CPU per changed poll', s(a.changedPoll?.serverCpuPerPollS, 3), s(h.changedPoll?.serverCpuPerPollS, 3), s(p.changedPoll?.serverCpuPerPollS, 3)],
    ['server CPU per report push', s(a.pushAtOnce?.serverCpuPerPushS, 3), s(h.push?.serverCpuPerPushS, 3), s(p.push?.serverCpuPerPushS, 3)],
    ['  with core.alternateRefsPrefixes=refs/heads/main', '', s(h.pushTuned?.serverCpuPerPushS, 3), s(p.pushTuned?.serverCpuPerPushS, 3)],
    [`all ${a.nodes ?? '-'} push at once: landed / lost / retries`, a.pushAtOnce ? `${a.pushAtOnce.landed} / ${a.pushAtOnce.lost} / ${a.pushAtOnce.retries}` : '-', '', ''],
    ['  wall time, server CPU', a.pushAtOnce ? `${s(a.pushAtOnce.wallS, 1)}, ${s(a.pushAtOnce.serverCpuS, 1)}` : '-', '', ''],
    [`all poll at once: wall, server CPU`, a.noopPoll ? `${s(a.noopPoll.wallS, 1)}, ${s(a.noopPoll.serverCpuS, 1)}` : '-', '', ''],
    [`changed polls, 32 at a time: wall, server CPU`, a.changedPoll ? `${s(a.changedPoll.wallS, 1)}, ${s(a.changedPoll.serverCpuS, 1)}` : '-', '', ''],
    ['mesh-cli status --json, first run in a new checkout', statusLine(a.statusCold), statusLine(b.statusCold), ''],
    [`mesh-cli status --json, every report changed since the last run${b.statusEvery ? ` (${b.nodes} nodes: median of ${b.statusEvery.length} runs)` : ''}`, statusLine(a.status), statusLine(b.status), ''],
    ['  each run: wall (CPU; machine probe)', '', b.statusEvery ? b.statusEvery.map(eachRun).join(', ') : '-', ''],
    ['  a tenth of the reports changed', '', statusLine(b.statusTenth), ''],
    ['  nothing changed', '', statusLine(b.statusSame), ''],
    [`  over ${b.sharded?.shards ?? '-'} report shards (${b.sharded?.nodesPerShard?.join(' + ') ?? '-'} nodes), first run in a new checkout`, '', statusLine(b.sharded?.statusCold), ''],
    [`  over the shards, every report changed${b.sharded ? ` (median of ${b.sharded.statusEvery.length} runs)` : ''}`, '', statusLine(b.sharded?.status), ''],
    ['    each run: wall (CPU; machine probe)', '', b.sharded ? b.sharded.statusEvery.map(eachRun).join(', ') : '-', ''],
    ['generated report commits pass git verify-commit', '', b.generatedCommitVerifies === undefined ? '-' : String(b.generatedCommitVerifies), ''],
    ['operator cold clone (all report branches)', '', b.coldClone ? `${s(b.coldClone.wallS)}, server CPU ${s(b.coldClone.serverCpuS)}` : '-', ''],
    ['report history per node after the bench', a.historyPerNode === undefined ? '-' : `${a.historyPerNode} commits`, '', ''],
  ];
  const g = r.growth;
  if (g) {
    rows.push([`report repo growth per node per day (${g.heartbeatsPerDay} heartbeats, reachable after gc)`, `${g.replace.growthBytesPerDay} bytes (${g.replace.commits} commits in history)`, `stacking instead: ${kb(g.stack.growthBytesPerDay)} (${g.stack.commits} commits)`, '']);
    rows.push(['  replaced heartbeats, unreachable until gc prunes them', `${kb(g.replace.unreachableBytesPerDay)} (${g.replace.looseKiBBeforePrune} KiB on disk, loose)`, '', '']);
  }
  if (r.real || r.big) print(rows);
  const layout = layoutRows(r.layout);
  if (layout.length) {
    if (r.real || r.big) console.log('');
    print(layout);
  }
  const bursts = burstRows(r.burst);
  if (bursts.length) {
    if (r.real || r.big || layout.length) console.log('');
    print(bursts);
  }
}

function print(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const row of rows) console.log(row.map((c, i) => c.padEnd(widths[i])).join(' | ').trimEnd());
}
