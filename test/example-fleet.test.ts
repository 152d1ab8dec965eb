/**
 * The example fleet (examples/fleet-repo) stays a valid, real fleet: `mesh-cli init --example`
 * takes it, nodes placed in its groups validate, and each renders what its groups, roles,
 * variables and facts make. Plain `init` takes only the scaffold: a new fleet declares nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cli, git, signingKey } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

describe('the example fleet', () => {
  let dir: string;
  let key: string;
  beforeAll(() => {
    dir = tempDir('mesh-example-');
    key = signingKey(join(dir, 'key'));
  });

  it('plain init declares nothing: only mesh.yaml, the READMEs, the CI workflow and the pre-push trust check', async () => {
    const checkout = join(dir, 'plain');
    expect((await cli(dir, 'init', checkout, '--signing-key', key, '--signer', 'test@localhost')).code).toBe(0);
    expect((await git(checkout, 'ls-files')).split('\n')).toEqual(['.githooks/pre-push', '.github/workflows/mesh.yml', 'README.md', 'mesh.yaml', 'nodes/README.md', 'roles/README.md']);
  });

  it('a fleet whose origin hosts cannot reach (an ssh address): init says so, token issue refuses it and writes nothing, and takes --url', async () => {
    const checkout = join(dir, 'ssh-origin');
    const origin = 'git@git.example.org:ops/fleet.git';
    const init = await cli(dir, 'init', checkout, '--remote', origin, '--signing-key', key, '--signer', 'test@localhost');
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toContain(`then mesh-cli token issue NODE --url URL: hosts fetch over HTTP(S) only, so each token needs the http:// or https:// URL of this repository (origin, ${origin}, is not one)`);
    const head = await git(checkout, 'rev-parse', 'HEAD');
    const token = join(checkout, '..', 'ssh-origin-web-1.token');
    const refused = await cli(checkout, 'token', 'issue', 'web-1', '--out', token);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`hosts fetch and push over HTTP(S) only, and the fleet's URL is origin's, '${origin}': pass --url with the http:// or https:// URL hosts will use`);
    // A read mirror given as a path is refused the same way.
    const mirror = await cli(checkout, 'token', 'issue', 'web-1', '--url', 'http://127.0.0.1:1/fleet.git', '--mirror', '/srv/fleet.git', '--out', token);
    expect(mirror.code).toBe(2);
    expect(mirror.stderr).toContain("a mirror's URL is '/srv/fleet.git'");
    expect(existsSync(token)).toBe(false);
    expect(await git(checkout, 'rev-parse', 'HEAD')).toBe(head);
    expect(await git(checkout, 'status', '--porcelain')).toBe('');
    const issued = await cli(checkout, 'token', 'issue', 'web-1', '--url', 'http://127.0.0.1:1/fleet.git', '--out', token);
    expect(issued.code, issued.stderr).toBe(0);
    expect(readFileSync(token, 'utf8')).toContain('url: http://127.0.0.1:1/fleet.git');
  });

  it('init refuses a remote git could not push to (no URL, no ssh address, no folder there), creating nothing; a bare repository beside it is taken', async () => {
    const checkout = join(dir, 'bad-remote');
    const refused = await cli(dir, 'init', checkout, '--remote', 'fleet-repo', '--signing-key', key, '--signer', 'test@localhost');
    expect([refused.code, refused.stderr]).toEqual([2, `mesh-cli: --remote fleet-repo is neither a URL (https://HOST/PATH), an ssh address (git@HOST:PATH) nor a folder that exists (from ${checkout}): give the address of the fleet repository to push to; nothing was created\n`]);
    expect(existsSync(checkout)).toBe(false);
    await git(dir, 'init', '--quiet', '--bare', 'beside.git');
    const taken = await cli(dir, 'init', checkout, '--remote', '../beside.git', '--signing-key', key, '--signer', 'test@localhost');
    expect(taken.code, taken.stderr).toBe(0);
    expect(await git(checkout, 'push', '--quiet', 'origin', 'main')).toBe('');
  });

  it('init --example gives groups, roles and variables that validate and render for nodes placed in them', async () => {
    const checkout = join(dir, 'example');
    expect((await cli(dir, 'init', checkout, '--example', '--signing-key', key, '--signer', 'test@localhost')).code).toBe(0);
    await git(checkout, 'remote', 'add', 'origin', 'http://127.0.0.1:9/fleet.git'); // tokens carry it; nothing is fetched here
    for (const [node, group] of [['web-1', 'web'], ['web-2', 'web'], ['db-1', 'db']]) {
      const issued = await cli(checkout, 'token', 'issue', node!, '--group', group!, '--out', join(dir, `${node}.token`));
      expect(issued.code, issued.stderr).toBe(0);
    }
    expect(existsSync(join(checkout, 'nodes/web/web-2/node.yaml'))).toBe(true);
    const set = await cli(checkout, 'set', 'nodes/web/web-2/vars.yaml', 'port=9191');
    expect(set.code, set.stderr).toBe(0);
    const validate = await cli(checkout, 'validate', '--no-fetch');
    expect(validate.code, validate.stdout).toBe(0);
    expect(validate.stderr).toContain('valid: 3 nodes, 2 roles, mesh.yaml');
    const vars = await cli(checkout, 'vars', 'web-2', '--json');
    expect(JSON.parse(vars.stdout)).toMatchObject({ values: { port: 9191, greeting: 'managed by mesh' } });
  });
});
