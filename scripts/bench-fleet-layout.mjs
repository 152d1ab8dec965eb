// Bench phase 4: what a host's changed poll downloads with the grouped layout against the flat
// one, at the same number of nodes. Each layout is its own fleet repo on its own `mesh-cli serve`:
//   flat     nodes/<node>/ for every node (node.yaml, base.yaml)
//   grouped  nodes/g-XX/<node>/, G groups of n/G nodes, each group with a vars.yaml
// SAMPLE real simulated hosts of the first group (the same nodes in both layouts) start from a
// shallow fetch of main, then one commit at a time changes one file and every sample host
// polls, fetches and loads its declaration (agent/fleet/git.ts, as `mesh-host run` does). The
// bytes are what the host's HTTP client sent and received (requests, headers and packs).
import { join } from 'node:path';
import { commitFiles, git, measured, nodeNames, perOp, pool, progress } from './bench-fleet-lib.mjs';

const SAMPLE = 8;
/** Hosts that meet one change of main in the fleet-change measure, per side (cache on, off). */
const CHANGE_SAMPLE = 32;
const MESH_YAML = 'name: bench\nmainBranch: main\ntrust: none\nsigners: []\n';

/** Run phase 4 with `n` nodes in `groups` groups; `served(name)` starts a server on a new fleet repo. */
export async function layouts(sim, { n, groups, work, served }) {
  progress(`phase 4: ${n} nodes, flat and in ${groups} groups`);
  const keys = nodeNames(n).map((name) => sim.nodeKeys(name));
  const per = Math.ceil(n / groups);
  const group = (i) => `g-${String(Math.floor(i / per)).padStart(2, '0')}`;
  const now = new Date();
  const layoutsOf = {
    flat: { dir: (i) => `nodes/${keys[i].node}`, groupFile: null },
    grouped: { dir: (i) => `nodes/${group(i)}/${keys[i].node}`, groupFile: (g) => `nodes/${g}/vars.yaml` },
  };
  const out = { nodes: n, groups, perGroup: per, sample: SAMPLE };
  for (const [name, layout] of Object.entries(layoutsOf)) {
    const { bare, server } = await served(`layout-${name}`);
    const files = { 'mesh.yaml': MESH_YAML };
    keys.forEach((k, i) => Object.assign(files, { [`${layout.dir(i)}/node.yaml`]: sim.identityYaml(k, now), [`${layout.dir(i)}/base.yaml`]: sim.declarationYaml(k.node) }));
    if (layout.groupFile) for (let g = 0; g * per < n; g++) files[layout.groupFile(group(g * per))] = vars(group(g * per), 0);
    commitFiles(bare, files, `fleet: ${n} nodes, ${name}`);
    out[name] = await sample(sim, { name, work: join(work, name), bare, server, keys, layout, last: n - 1, own: group(0) });
    if (layout.groupFile) out.fleetChange = await fleetChange(sim, { work: join(work, `${name}-change`), bare, keys, layout, served, data: join(bare, '..') });
  }
  return out;
}

/**
 * One change of main as the whole fleet meets it, per host: CHANGE_SAMPLE hosts spread over the
 * groups poll, fetch, load and push their report, with the server's pack cache on and, on a second
 * server over the same repository, off (`serve --no-pack-cache`); each side its own nodes, so that
 * no two hosts push one branch. With the cache on, the first host of a change makes the pack and
 * the rest get copies, as in a fleet where thousands fetch the same step.
 */
async function fleetChange(sim, { work, bare, keys, layout, served, data }) {
  const spread = (offset) => Array.from({ length: CHANGE_SAMPLE }, (_, i) => keys[(i * Math.floor(keys.length / CHANGE_SAMPLE) + offset) % keys.length]);
  const out = {};
  for (const [side, args, offset] of [['cacheOn', [], 1], ['cacheOff', ['--no-pack-cache'], 2]]) {
    progress(`grouped: one change of main across ${CHANGE_SAMPLE} hosts, pack cache ${side === 'cacheOn' ? 'on' : 'off'}`);
    const { server } = await served(`layout-change-${side}`, { data, args });
    const url = `${server.url}fleet.git`;
    const mine = spread(offset);
    const template = join(work, side, 'template');
    await sim.fetchTemplate(template, url, mine[0]);
    const hosts = await pool(mine, 8, (k) => sim.SimHost.open(join(work, side, k.node), url, k, { template }));
    await pool(hosts, 8, async (h) => h.report((await h.contact()).body, new Date())); // the report branches exist
    const last = keys.length - 1;
    commitFiles(bare, { [`${layout.dir(last)}/base.yaml`]: sim.declarationYaml(keys[last].node, Date.now()) }, `${side}: one node changes`, git(bare, ['rev-parse', 'main']));
    const before = hosts.map((h) => h.meter());
    const meet = async (h) => {
      const c = await h.contact();
      if (!c.moved) throw new Error(`${side}: a host did not see main move`);
      await h.report(c.body, new Date(Date.now() + 60_000));
    };
    // The first host alone pays what the server does once per change of main (the trust check of
    // the new tip, the node list, the first pack); the later ones pay only what every host does.
    const first = await measured(server, () => meet(hosts[0]));
    const later = await measured(server, () => pool(hosts.slice(1), 8, meet));
    const serverCpuS = first.serverCpuS + later.serverCpuS;
    const perLater = later.serverCpuS / (hosts.length - 1);
    out[side] = {
      ...perOp(before, hosts.map((h) => h.meter())), hosts: hosts.length, wallS: first.wallS + later.wallS, serverCpuS,
      serverCpuPerHostS: serverCpuS / hosts.length, serverCpuFirstS: first.serverCpuS, serverCpuPerLaterHostS: perLater,
      // The same change met by every node of the fleet: once the first cost, then the later one per host.
      fleetCpuS: first.serverCpuS + (keys.length - 1) * perLater,
    };
  }
  return out;
}

function vars(group, revision) {
  return `group: ${group}\nrevision: ${revision}\n`;
}

/** SAMPLE hosts of the first group: first fetch, then one changed poll per kind of change. */
async function sample(sim, { name, work, bare, server, keys, layout, last, own }) {
  const url = `${server.url}fleet.git`;
  const mine = keys.slice(0, SAMPLE);
  const template = join(work, 'template');
  const first = await measured(server, () => sim.fetchTemplate(template, url, mine[0]));
  const hosts = await pool(mine, SAMPLE, (k) => sim.SimHost.open(join(work, k.node), url, k, { template }));
  await Promise.all(hosts.map((h) => h.contact())); // each host reads its own declaration once
  const meters = () => hosts.map((h) => h.meter());
  const out = { firstFetch: { requests: first.result.requests, bytes: first.result.sent + first.result.received, serverCpuS: first.serverCpuS } };
  let revision = 0;
  /** Commit `files` on main; every sample host polls, fetches and loads. */
  const changedPoll = async (files, what) => {
    progress(`${name}: ${what}`);
    commitFiles(bare, files, what, git(bare, ['rev-parse', 'main']));
    const before = meters();
    const r = await measured(server, () => pool(hosts, 4, (h) => h.contact()));
    if (r.result.some((c) => !c.moved)) throw new Error(`${name}: a host did not see main move`);
    return { ...perOp(before, meters()), serverCpuPerPollS: r.serverCpuS / hosts.length };
  };
  const nodeFile = (i) => ({ [`${layout.dir(i)}/base.yaml`]: sim.declarationYaml(keys[i].node, ++revision) });
  out.otherNode = await changedPoll(nodeFile(last), `${keys[last].node} (in the last group) changes`);
  if (layout.groupFile) out.ownGroup = await changedPoll({ [layout.groupFile(own)]: vars(own, ++revision) }, `the hosts' own group file ${layout.groupFile(own)} changes`);
  out.ownNode = await changedPoll(nodeFile(0), `${keys[0].node} (a sample host's own folder) changes`);
  return out;
}

/** The rows bench-fleet-table.mjs prints for phase 4. */
export function layoutRows(r) {
  if (!r) return [];
  const kb = (o) => (o ? `${o.requests} req, ${(o.bytes / 1024).toFixed(1)} KB` : '-');
  return [
    ['', `${r.nodes} nodes, flat nodes/<node>/`, `${r.nodes} nodes, grouped nodes/g-XX/<node>/ (${r.groups} × ${r.perGroup})`],
    ['first fetch (shallow main)', kb(r.flat.firstFetch), kb(r.grouped.firstFetch)],
    [`changed poll, per host (${r.sample} hosts of the first group): another group's node changed (flat: another node)`, kb(r.flat.otherNode), kb(r.grouped.otherNode)],
    ['  the hosts\' own group file changed (nodes/g-00/vars.yaml)', '-', kb(r.grouped.ownGroup)],
    ['  one sample host\'s own node folder changed', kb(r.flat.ownNode), kb(r.grouped.ownNode)],
    ['server CPU per changed poll (another node changed)', `${r.flat.otherNode.serverCpuPerPollS.toFixed(3)} s`, `${r.grouped.otherNode.serverCpuPerPollS.toFixed(3)} s`],
    ...(r.fleetChange ? [
      [`one change of main, per host (${r.fleetChange.cacheOn.hosts} hosts over the groups: poll, fetch, report push): pack cache on`, '-', `${kb(r.fleetChange.cacheOn)}, server CPU ${r.fleetChange.cacheOn.serverCpuPerHostS.toFixed(3)} s`],
      ['  pack cache off (serve --no-pack-cache)', '-', `${kb(r.fleetChange.cacheOff)}, server CPU ${r.fleetChange.cacheOff.serverCpuPerHostS.toFixed(3)} s`],
      ...['cacheOn', 'cacheOff'].filter((side) => r.fleetChange[side].fleetCpuS !== undefined).flatMap((side) => {
        const c = r.fleetChange[side];
        return [
          [`  ${side === 'cacheOn' ? 'cache on' : 'cache off'}: the first host (what the server does once per change, and that host's own work), then each later host`, '-', `${c.serverCpuFirstS.toFixed(3)} s, then ${c.serverCpuPerLaterHostS.toFixed(4)} s per host`],
          [`  ${side === 'cacheOn' ? 'cache on' : 'cache off'}: one change met by all ${r.nodes} nodes (first + ${r.nodes - 1} later), server CPU`, '-', `${c.fleetCpuS.toFixed(0)} CPU-s = ${(c.fleetCpuS / r.nodes).toFixed(4)} s per host; ${(c.fleetCpuS / 2 / 60).toFixed(1)} min on 2 cores`],
        ];
      }),
    ] : []),
  ];
}
