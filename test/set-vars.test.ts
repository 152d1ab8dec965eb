/** mesh-cli set (a pipeline's one write) and mesh-cli vars (a node's variables and where each came from), run as built. */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, git } from './helpers/fleet.js';

const scratch = mkdtempSync(join(tmpdir(), 'mesh-setvars-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function write(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

describe('mesh-cli set', () => {
  it('changes values in place, keeping comments, order and quoting, and says what changed', async () => {
    const file = join(scratch, 'vars.yaml');
    writeFileSync(file, '# web tier\nport: 8080 # the public port\napp_version: "1.4.1"\ntls:\n  # certificates\n  on: false\n');
    const r = await cli(scratch, 'set', file, 'app_version=1.4.2', 'tls.on=true', 'port=8080', 'tls.min=1.10', 'workers=4');
    expect(r.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe('# web tier\nport: 8080 # the public port\napp_version: "1.4.2"\ntls:\n  # certificates\n  on: true\n  min: "1.10"\nworkers: 4\n');
    expect(r.stdout.split('\n').filter(Boolean)).toEqual([
      `${file}: app_version: "1.4.1" -> "1.4.2"`,
      `${file}: tls.on: false -> true`,
      `${file}: port = 8080 (unchanged)`,
      `${file}: tls.min: (not set) -> "1.10"`,
      `${file}: workers: (not set) -> 4`,
    ]);
  });

  it('refuses what it cannot do with a clear error, and changes nothing', async () => {
    const file = join(scratch, 'list.yaml');
    writeFileSync(file, 'port: 1\nhosts: [a]\n');
    const bad = await cli(scratch, 'set', file, 'hosts.first=x');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(`mesh-cli: hosts in ${file} is a list, so hosts.first cannot be set: name its item by number (hosts.0 is the first)\n`);
    expect((await cli(scratch, 'set', file, 'port.first=x')).stderr).toBe(`mesh-cli: port in ${file} is not a map, so port.first cannot be set\n`);
    expect((await cli(scratch, 'set', file, 'hosts.2=x')).stderr).toBe(`mesh-cli: hosts in ${file} has 1 item, so hosts.2 cannot be set: give 0 to change it, or 1 to add one after it\n`);
    expect((await cli(scratch, 'set', file, 'nokey')).stderr).toContain("'nokey' is not KEY=VALUE");
    expect((await cli(scratch, 'set', join(scratch, 'no/such/dir/vars.yaml'), 'a=1')).stderr).toContain('neither does its folder');
    expect(readFileSync(file, 'utf8')).toBe('port: 1\nhosts: [a]\n');
  });

  it('reaches into a list by number: an item it has is changed, one past the last is added', async () => {
    const file = join(scratch, 'ports.yaml');
    writeFileSync(file, 'ports:\n  - 80 # http\n  - 443\nupstreams:\n  - host: a\n    weight: 1\n');
    const r = await cli(scratch, 'set', file, 'ports.1=8443', 'ports.2=9000', 'upstreams.0.weight=5');
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe('ports:\n  - 80 # http\n  - 8443\n  - 9000\nupstreams:\n  - host: a\n    weight: 5\n');
    expect(r.stdout.split('\n').filter(Boolean)).toEqual([`${file}: ports.1: 443 -> 8443`, `${file}: ports.2: (not set) -> 9000`, `${file}: upstreams.0.weight: 1 -> 5`]);
  });
});

describe('mesh-cli vars', () => {
  it("prints a node's variables and, with --explain, the file that set each and what it replaced", async () => {
    const repo = join(scratch, 'fleet');
    write(repo, {
      'mesh.yaml': 'name: t\n',
      'nodes/vars.yaml': 'port: 8080\ndebug: true\nregion: eu\n',
      'nodes/web/vars.yaml': 'port: 9090\n',
      'nodes/web/web-2/node.yaml': 'node: web-2\ngeneration: 1\n',
      'nodes/web/web-2/vars.yaml': 'port: 9191\ndebug: null\n',
      'nodes/db/db-1/node.yaml': 'node: db-1\ngeneration: 1\n',
    });
    await git(repo, 'init', '-q');
    expect((await cli(repo, 'vars', 'web-2')).stdout).toBe('port: 9191\nregion: eu\n');
    expect((await cli(repo, 'vars', 'web-2', 'port')).stdout).toBe('9191\n');
    expect((await cli(repo, 'vars', 'web-2', '--explain')).stdout).toBe([
      '# web-2 (nodes/web/web-2/): levels nodes/, nodes/web/, nodes/web/web-2/',
      '# debug: unset (null) by nodes/web/web-2/vars.yaml; replaces nodes/vars.yaml',
      'port: 9191',
      '  # set by nodes/web/web-2/vars.yaml; replaces nodes/vars.yaml, nodes/web/vars.yaml',
      'region: eu',
      '  # set by nodes/vars.yaml',
      '',
    ].join('\n'));
    expect((await cli(repo, 'vars', 'db-1', 'port')).stdout).toBe('8080\n');
    const missing = await cli(repo, 'vars', 'web-9');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('there is no node web-9 under nodes/ (a folder holding node.yaml); the nodes are: db-1, web-2');
    const noRev = await cli(repo, 'vars', 'web-2', '--rev', 'nope');
    expect([noRev.code, noRev.stderr]).toEqual([2, `mesh-cli: nope is not a commit in ${repo}: fetch it first, or name a branch, tag or commit id\n`]);
    write(repo, { 'nodes/web/vars.yaml': '- not a map\n' });
    const broken = await cli(repo, 'vars', 'web-2');
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain('nodes/web/vars.yaml:1:1: vars.yaml must be a map of variable names to values');
  });
});
