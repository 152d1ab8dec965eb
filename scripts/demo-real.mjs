// `npm run demo -- --real`: after the simulated machines, one real Debian machine (systemd as
// PID 1, booted with systemd-nspawn as the system tests do: test/system/container.ts) joins the
// same fleet. It installs the mesh-host .deb, enrols, runs under systemd, brings up a declared
// service, then upgrades itself to a newer mesh-host declared in the fleet: the new version is
// self-tested, the old one exits, systemd starts the new one, and `mesh-cli status` shows it.
// Needs root and debootstrap, systemd-nspawn, dpkg-repack (scripts/install-deps.sh installs
// them); the Debian root is built once and cached under ~/.cache/mesh/system.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const NODE = 'real-1';
const FIRST = '1.0.0';
const NEXT = '1.1.0';
const HELLO = '[Unit]\nDescription=hello from the fleet\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n';

/** The container helpers of the system tests, bundled for this script (they are TypeScript). */
async function containerModule(top, work) {
  const out = join(work, 'container.mjs');
  await build({ entryPoints: [join(top, 'test/system/container.ts')], bundle: true, platform: 'node', format: 'esm', outfile: out, logLevel: 'warning' });
  return import(pathToFileURL(out).href);
}

/**
 * The real machine's part of the demo. `d` is the demo's own: its folder, the fleet checkout, the
 * package folder and URL of the running server, and its `say`/`show`/`mesh` helpers.
 */
export async function realMachine(d) {
  const { boot, missingTools } = await containerModule(d.top, d.work);
  const missing = await missingTools();
  if (missing) throw new Error(`the real machine cannot run here: ${missing}`);

  d.say(`A real machine: building mesh-host ${FIRST} and ${NEXT} as .deb packages and adding them to the fleet's package repository`);
  const debs = join(d.work, 'debs');
  for (const version of [FIRST, NEXT]) {
    const deb = execFileSync(process.execPath, [join(d.top, 'scripts/package-deb.mjs'), '--out', debs], { env: { ...process.env, MESH_BUILD_VERSION: version }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n').pop();
    console.log(`$ MESH_BUILD_VERSION=${version} npm run package:deb -- --out debs`);
    d.show('mesh-cli', ['packages', 'add', deb, '--dir', d.packages], d.work);
  }

  const release = process.env.MESH_DEMO_RELEASE ?? 'bookworm';
  d.say(`Booting a Debian ${release} machine with systemd as PID 1 (systemd-nspawn; it shares this machine's 127.0.0.1)`);
  const dir = join(d.work, 'real');
  mkdirSync(dir);
  const box = await boot(dir, release, (line) => console.log(`    ${line}`));
  const inside = async (...args) => {
    console.log(`  [${NODE}]$ ${args.join(' ')}`);
    const out = await box.must(...args);
    if (out.trim()) console.log(out.trimEnd().replace(/^/gm, '    '));
    return out;
  };
  try {
    writeFileSync(join(box.root, 'etc/apt/sources.list'), ''); // only the fleet's package repository: nothing waits on the internet
    rmSync(join(box.root, 'etc/apt/sources.list.d/debian.sources'), { force: true });
    copyFileSync(join(debs, `mesh-host_${FIRST}_all.deb`), join(box.root, 'root/mesh-host.deb'));
    await inside('dpkg', '-i', '/root/mesh-host.deb');

    d.say(`Issuing ${NODE}'s token (group real), carrying it to the machine and enrolling there`);
    d.show('mesh-cli', ['token', 'issue', NODE, '--group', 'real', '--out', join(d.work, `${NODE}.token`)], d.fleet);
    d.show('git', ['push', '--quiet'], d.fleet);
    copyFileSync(join(d.work, `${NODE}.token`), join(box.root, 'root/node.token'));
    await inside('mesh-host', 'enrol', '--token-file', '/root/node.token');
    writeFileSync(join(box.root, 'etc/mesh-host/environment'), 'MESH_HOST_OPTIONS="--interval 2s"\n');

    d.say(`Declaring a systemd service for ${NODE}, pushing, and starting mesh-host under systemd`);
    const hello = `  - type: file\n    path: /etc/systemd/system/hello.service\n    content: ${JSON.stringify(HELLO)}\n  - type: service\n    name: hello\n    enabled: true\n    running: true\n`;
    const first = commit(d, `resources:\n${hello}`, `${NODE}: a hello service`);
    await inside('systemctl', 'enable', '--now', 'mesh-host');
    await until(d, (row) => row.commit === first && row.outcome === 'applied', `${NODE} applied ${first.slice(0, 12)}`);
    // Exit 4, "not yet": the simulated machines run only when the demo runs them, so they have not applied main's newest commit.
    d.show('mesh-cli', ['status'], d.fleet, [0, 4]);
    console.log('    (web-1, web-2 and db-1 run only when the demo runs them, so they have not applied the newest commit: status exits 4, "not yet")');
    await inside('systemctl', 'is-active', 'hello');

    d.say(`Declaring mesh-host ${NEXT} for ${NODE}: it installs it, smoke-runs it, reports and exits; systemd starts ${NEXT}`);
    const source = `deb [trusted=yes] ${d.url}packages/ ./\n`;
    const upgrade = `  - type: file\n    path: /etc/apt/sources.list.d/mesh.list\n    content: ${JSON.stringify(source)}\n  - type: package\n    name: mesh-host\n    version: "${NEXT}"\n`;
    const second = commit(d, `resources:\n${hello}${upgrade}`, `${NODE}: mesh-host ${NEXT}`);
    await until(d, (row) => row.commit === second && row.hostVersion === NEXT && row.outcome === 'applied', `${NODE} running ${NEXT}`);
    d.show('mesh-cli', ['status', '--commit', 'HEAD'], d.fleet, [0, 4]);
    await inside('dpkg-query', '--show', 'mesh-host');
    await inside('systemctl', 'show', '--property=NRestarts', '--property=ActiveState', 'mesh-host');
    console.log(`  [${NODE}]$ journalctl -u mesh-host (its last lines)`);
    console.log((await box.must('journalctl', '--no-pager', '-o', 'cat', '-n', '6', '-u', 'mesh-host')).trimEnd().replace(/^/gm, '    '));
  } finally {
    d.say(`Powering ${NODE} off`);
    await box.stop();
  }
}

/** Write nodes/real/NODE/base.yaml, commit (signed, as the fleet is set up) and push; the commit. */
function commit(d, yaml, message) {
  writeFileSync(join(d.fleet, `nodes/real/${NODE}/base.yaml`), yaml);
  d.show('git', ['add', '-A'], d.fleet);
  d.show('git', ['commit', '--quiet', '-m', message], d.fleet);
  d.show('git', ['push', '--quiet'], d.fleet);
  return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: d.fleet, encoding: 'utf8' }).trim();
}

/** Poll `mesh-cli status --json` until NODE's row passes `test` (2 minutes at most). */
async function until(d, test, what) {
  console.log(`    (waiting for ${what})`);
  for (const end = Date.now() + 120_000; Date.now() < end; await new Promise((r) => setTimeout(r, 1000))) {
    const row = d.status().nodes.find((r) => r.node === NODE);
    if (row && test(row)) return row;
  }
  throw new Error(`no report of ${what} within 2 minutes`);
}
