/**
 * The CGI program `mesh-cli hook http-backend-script` prints (mesh-cli/server/backend-script.ts),
 * run by sh as a web server runs it, with `env` in place of git http-backend so that the test
 * reads the configuration it hands to git: nothing hidden from an operator, every other node's
 * report branch hidden from a node (as serve's nodeRefs), every report branch from a request
 * without a user, and a clear refusal when the repository names no operators file.
 * test/apache.test.ts runs it in front of the real backend.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { httpBackendScript } from '../mesh-cli/server/backend-script.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();

function setup(operators: string | null): { root: string; script: string } {
  const root = tmp('mesh-backend-script-');
  const repo = join(root, 'git', 'fleet.git');
  mkdirSync(repo, { recursive: true });
  execFileSync('git', ['init', '--quiet', '--bare', repo]);
  if (operators !== null) {
    writeFileSync(join(root, 'operators.htpasswd'), operators);
    execFileSync('git', ['--git-dir', repo, 'config', 'mesh.operators', '../../operators.htpasswd']);
  }
  const script = join(root, 'backend');
  writeFileSync(script, httpBackendScript('/usr/bin/env'), { mode: 0o755 });
  return { root, script };
}

/** The GIT_CONFIG_* pairs the script hands git for a request by `user`, or its whole output when it refuses. */
function configFor({ root, script }: { root: string; script: string }, user: string | undefined, path = '/fleet.git/info/refs'): { pairs: string[]; out: string } {
  const env: Record<string, string> = { PATH: process.env.PATH!, GIT_PROJECT_ROOT: join(root, 'git'), PATH_INFO: path, ...(user === undefined ? {} : { REMOTE_USER: user }) };
  const out = execFileSync('sh', [script], { env, encoding: 'utf8' });
  const vars = new Map(out.split('\n').filter((l) => l.startsWith('GIT_CONFIG_')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  const count = Number(vars.get('GIT_CONFIG_COUNT') ?? 0);
  return { pairs: Array.from({ length: count }, (_, i) => `${vars.get(`GIT_CONFIG_KEY_${i}`)}=${vars.get(`GIT_CONFIG_VALUE_${i}`)}`), out };
}

const ALTERNATES = 'core.alternateRefsPrefixes=refs/heads/main';

describe('the http-backend CGI program', () => {
  const fleet = setup('# operators\nalice:$5$rounds=1000$salt$hash\nbob\n');

  it('hides nothing from an operator, whatever the request', () => {
    expect(configFor(fleet, 'alice').pairs).toEqual([ALTERNATES]);
    expect(configFor(fleet, 'bob', '/fleet.git/git-receive-pack').pairs).toEqual([ALTERNATES]);
  });

  it("hides every other node's report branch from a node, for fetch and push, as serve does", () => {
    const hidden = ['refs/heads/reports/', '!refs/heads/reports/web-1'];
    const expected = [ALTERNATES, ...hidden.map((v) => `uploadpack.hideRefs=${v}`), ...hidden.map((v) => `receive.hideRefs=${v}`)];
    expect(configFor(fleet, 'web-1').pairs).toEqual(expected);
    expect(configFor(fleet, 'web-1', '/fleet.git/git-upload-pack').pairs).toEqual(expected);
  });

  it('treats a commented name, a name that only starts like an operator and no name at all as no operator', () => {
    expect(configFor(fleet, '# operators').pairs).toContain('uploadpack.hideRefs=refs/heads/reports/');
    expect(configFor(fleet, 'ali').pairs).toContain('uploadpack.hideRefs=!refs/heads/reports/ali');
    // Without a user every report branch stays hidden: nothing is un-hidden.
    expect(configFor(fleet, undefined).pairs).toEqual([ALTERNATES, 'uploadpack.hideRefs=refs/heads/reports/', 'receive.hideRefs=refs/heads/reports/']);
    expect(configFor(fleet, '').pairs).toEqual([ALTERNATES, 'uploadpack.hideRefs=refs/heads/reports/', 'receive.hideRefs=refs/heads/reports/']);
  });

  it("refuses the dumb protocol's files, which would pass by the hidden refs", () => {
    const { out } = configFor(fleet, 'web-1', '/fleet.git/objects/info/packs');
    expect(out).toMatch(/^Status: 500 Internal Server Error\r\n/);
    expect(out).not.toContain('GIT_CONFIG_COUNT');
  });

  it('refuses to serve a repository that names no operators file, saying what to set', () => {
    const { out } = configFor(setup(null), 'alice');
    expect(out).toMatch(/^Status: 500 Internal Server Error\r\n/);
    expect(out).toContain('no readable operators file (git config mesh.operators)');
    expect(out).not.toContain('GIT_CONFIG_COUNT');
  });
});
