/** The fleet language's pure parts in core/: where nodes sit, how variables layer, how templates render. */
import { describe, expect, it } from 'vitest';
import { LineCounter, parseDocument, type Node, type Scalar } from 'yaml';
import { placeOfScalar } from '../core/declaration/place.js';
import { findNode, levelsOf, readLayout } from '../core/fleet/layout.js';
import { renderTemplate, isTemplate, type TemplateScope } from '../core/declaration/template.js';
import { layerVars, readVars } from '../core/declaration/vars.js';
import { fromFiles } from '../mesh-cli/tree.js';

const tree = (paths: Record<string, string>) => fromFiles(new Map(Object.entries(paths)));
const same = (line: number, col: number) => ({ line, col });

describe('layout: a folder with node.yaml is a node, any other folder a group', () => {
  it('finds nodes at any depth with their groups, outermost first', async () => {
    const layout = await readLayout(tree({
      'nodes/vars.yaml': 'a: 1\n',
      'nodes/web/base.yaml': '',
      'nodes/web/web-1/node.yaml': '',
      'nodes/web/eu/web-2/node.yaml': '',
      'nodes/db-1/node.yaml': '',
    }));
    expect(layout.problems).toEqual([]);
    expect(layout.groups).toEqual(['web', 'web/eu']);
    expect([...layout.nodes.values()]).toEqual([
      { node: 'db-1', dir: 'nodes/db-1', groups: [] },
      { node: 'web-2', dir: 'nodes/web/eu/web-2', groups: ['web', 'web/eu'] },
      { node: 'web-1', dir: 'nodes/web/web-1', groups: ['web'] },
    ]);
    expect(levelsOf(layout.nodes.get('web-2')!)).toEqual(['nodes', 'nodes/web', 'nodes/web/eu', 'nodes/web/eu/web-2']);
  });

  it('finds one node from where it was last time, or by walking the groups', async () => {
    const t = tree({ 'nodes/web/eu/web-2/node.yaml': '', 'nodes/web/web-1/node.yaml': '', 'nodes/db-1/node.yaml': '' });
    expect(await findNode(t, 'web-2')).toEqual({ node: 'web-2', dir: 'nodes/web/eu/web-2', groups: ['web', 'web/eu'] });
    expect(await findNode(t, 'web-2', 'nodes/web/eu/web-2')).toEqual({ node: 'web-2', dir: 'nodes/web/eu/web-2', groups: ['web', 'web/eu'] });
    expect(await findNode(t, 'web-1', 'nodes/old/web-1')).toEqual({ node: 'web-1', dir: 'nodes/web/web-1', groups: ['web'] });
    expect(await findNode(t, 'db-1')).toEqual({ node: 'db-1', dir: 'nodes/db-1', groups: [] });
    expect(await findNode(t, 'db-2')).toBeNull();
  });

  it('names both folders of a duplicate node, and refuses folders inside a node', async () => {
    const layout = await readLayout(tree({
      'nodes/web/app-1/node.yaml': '',
      'nodes/db/app-1/node.yaml': '',
      'nodes/db-2/node.yaml': '',
      'nodes/db-2/extra/x.yaml': '',
    }));
    expect(layout.problems.map((p) => `${p.file}: ${p.message}`)).toEqual([
      'nodes/db-2/extra: nodes/db-2/ is a node (it holds node.yaml), so it cannot hold the folder extra/: move groups and nodes out of node folders',
      'nodes/web/app-1/node.yaml: node app-1 is also at nodes/db/app-1/: node names are unique across nodes/ (its report branch is reports/app-1); rename or remove one',
    ]);
  });

  it('refuses group names a node could not have and groups nested past the limit', async () => {
    const deep = Array.from({ length: 9 }, (_, i) => `g${i}`).join('/');
    const layout = await readLayout(tree({ 'nodes/Web_EU/n-1/node.yaml': '', [`nodes/${deep}/n-2/node.yaml`]: '' }));
    expect(layout.problems.map((p) => p.message)).toEqual([
      "group folder 'Web_EU' must be lower-case letters, digits and - (as node names are)",
      'groups nest at most 8 deep; flatten nodes/g0/g1/g2/g3/g4/g5/g6/g7/g8/',
    ]);
  });
});

describe('variables: the closer level replaces the whole key, null unsets it', () => {
  it('replaces whole values (maps and lists are never merged) and explains each', () => {
    const vars = layerVars([
      { file: 'nodes/vars.yaml', values: { port: 8080, tls: { on: true, cert: 'a' }, users: ['ann'], debug: true } },
      { file: 'nodes/web/vars.yaml', values: { port: 9090, tls: { on: false }, users: ['bob'] } },
      { file: 'nodes/web/web-2/vars.yaml', values: { port: 9191, debug: null } },
    ]);
    expect(vars.values).toEqual({ port: 9191, tls: { on: false }, users: ['bob'] });
    expect(vars.origins).toEqual({
      port: { file: 'nodes/web/web-2/vars.yaml', replaced: ['nodes/vars.yaml', 'nodes/web/vars.yaml'] },
      tls: { file: 'nodes/web/vars.yaml', replaced: ['nodes/vars.yaml'] },
      users: { file: 'nodes/web/vars.yaml', replaced: ['nodes/vars.yaml'] },
    });
    expect(vars.unset).toEqual({ debug: { file: 'nodes/web/web-2/vars.yaml', replaced: ['nodes/vars.yaml'] } });
  });

  it('a value set again below an unset is in force again', () => {
    const vars = layerVars([
      { file: 'a', values: { x: 1 } },
      { file: 'b', values: { x: null } },
      { file: 'c', values: { x: 3 } },
    ]);
    expect(vars.values).toEqual({ x: 3 });
    expect(vars.unset).toEqual({});
  });

  it('a vars.yaml that is not a map, or has a name templates cannot read, is named with its place', () => {
    expect(readVars('- a\n- b\n', 'nodes/web/vars.yaml')).toEqual({ ok: false, problems: [{ file: 'nodes/web/vars.yaml', line: 1, col: 1, message: 'vars.yaml must be a map of variable names to values, e.g. "port: 8080"' }] });
    const bad = readVars('port: 1\napp-version: 2\n', 'nodes/vars.yaml');
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.problems).toEqual([{ file: 'nodes/vars.yaml', line: 2, col: 1, message: "'app-version': a variable name is letters, digits and _ (not starting with a digit), as templates read it: {{ vars.NAME }}" }]);
    expect(readVars('', 'nodes/vars.yaml')).toEqual({ ok: true, level: { file: 'nodes/vars.yaml', values: {} } });
  });
});

describe('templates: Liquid, strict about names and filters, lenient in if', () => {
  const scope: TemplateScope = { vars: { port: 9090, hosts: ['a', 'b'] }, node: { name: 'web-2', groups: ['web'] }, facts: { cpus: 4, os: 'debian' } };

  it('renders variables, the node, facts and filters, and says which it read', () => {
    const r = renderTemplate('port = {{ vars.port }}\nname = {{ node.name }}\nworkers = {{ vars.workers | default: facts.cpus }}\nhosts = {{ vars.hosts | join: "," }}\n', scope, 'f', same);
    expect(r).toEqual({ ok: true, text: 'port = 9090\nname = web-2\nworkers = 4\nhosts = a,b\n', reads: ['facts', 'node', 'vars'] });
    expect(renderTemplate('{% if vars.tls %}tls{% else %}plain{% endif %}', scope, 'f', same)).toEqual({ ok: true, text: 'plain', reads: ['vars'] });
  });

  it('an unknown variable is an error at its place, with what to do', () => {
    const at = (line: number, col: number) => ({ line: line + 10, col: col + 4 });
    expect(renderTemplate('a\nport = {{ vars.prot }}', scope, 'nodes/web/base.yaml', at)).toEqual({
      ok: false,
      problem: { file: 'nodes/web/base.yaml', line: 12, col: 15, message: 'unknown variable vars.prot: set it in a vars.yaml (nodes/, the node\'s groups or the node), or give a fallback with | default: VALUE' },
    });
    const fact = renderTemplate('{{ facts.memory }}', scope, 'f', same);
    expect(!fact.ok && fact.problem.message).toBe('unknown variable facts.memory: the facts are cpus, os');
    // A bare name, as Ansible and Salt templates write it: the level that has it.
    const bare = (t: string) => { const r = renderTemplate(t, scope, 'f', same); return !r.ok && r.problem.message; };
    expect(bare('{{ port }}')).toBe('unknown variable port: a template reads vars, node, facts; write vars.port');
    expect(bare('{{ cpus }}')).toBe('unknown variable cpus: a template reads vars, node, facts; write facts.cpus');
    expect(bare('{{ name }}')).toBe('unknown variable name: a template reads vars, node, facts; write node.name');
    expect(bare('{{ nothing }}')).toBe('unknown variable nothing: a template reads vars, node, facts');
    // A name no vars.yaml or secrets.yaml can hold (mesh-cli secret set refuses it): the name to use instead, not how to set this one.
    const withSecrets = renderTemplate('{{ secrets.db-password }}', { ...scope, secrets: {} }, 'f', same);
    expect(!withSecrets.ok && withSecrets.problem.message).toBe("unknown variable secrets.db-password: 'db-password' cannot be a name of secrets (letters, digits and _, not starting with a digit; Liquid reads a - in it as part of the name): name it db_password here and where it is set");
    expect(bare('{{ vars.app-port.x }}')).toBe("unknown variable vars.app-port: 'app-port' cannot be a name of vars (letters, digits and _, not starting with a digit; Liquid reads a - in it as part of the name): name it app_port here and where it is set");
    // Jinja's filters and arguments, as Ansible and Salt templates write them.
    expect(bare('{{ vars.port | upper }}')).toBe('undefined filter: upper: templates are Liquid, not Jinja: write | upcase');
    expect(bare('{{ vars.hosts | length }}')).toBe('undefined filter: length: templates are Liquid, not Jinja: write | size');
    expect(bare('{{ vars.port | default(80) }}')).toBe('expected ":" after filter name: templates are Liquid, not Jinja: a filter\'s arguments follow a colon (| default: 80, | join: ", "), not brackets');
    expect(bare('{{ vars.port | frobnicate }}')).toBe('undefined filter: frobnicate');
  });

  it('an unknown filter, a syntax error or a list printed as it is are errors too', () => {
    const messages = ['{{ vars.port | upcase_all }}', '{{ vars.port ', '{{ vars.hosts }}', '{% if %}'].map((t) => {
      const r = renderTemplate(t, scope, 'f', same);
      return r.ok ? 'rendered' : r.problem.message;
    });
    expect(messages[0]).toMatch(/^undefined filter: upcase_all/);
    expect(messages[1]).toMatch(/not closed/);
    expect(messages[2]).toMatch(/is a list and cannot be printed as it is; print it with a filter such as \| join: ", " or \| json/);
    expect(messages[3]).not.toBe('rendered');
  });

  it('values are data: a variable holding {{ }} is printed, not rendered again', () => {
    const r = renderTemplate('{{ vars.raw }}', { ...scope, vars: { raw: '{{ vars.port }}' } }, 'f', same);
    expect(r).toEqual({ ok: true, text: '{{ vars.port }}', reads: ['vars'] });
    expect(isTemplate('plain ${HOME} text')).toBe(false);
    expect(isTemplate('a {{ b }}')).toBe(true);
    expect(isTemplate('{% if x %}')).toBe(true);
  });
});

describe('template places: an error inside a YAML value is reported at the file\'s line and column', () => {
  const source = [
    'resources:',                       // 1
    '  - type: file',                   // 2
    '    path: /etc/{{ vars.nme }}',     // 3
    '    mode: "{{ vars.mod }}"',         // 4
    '    content: |',                   // 5
    '      port = 1',                   // 6
    '      name = {{ vars.bad }}',       // 7
    '',
  ].join('\n');
  const lines = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lines });
  const problemAt = (path: (string | number)[]) => {
    const node = doc.getIn(path, true) as Node;
    const r = renderTemplate(String((node as Scalar).value), { vars: {}, node: { name: 'n', groups: [] }, facts: {} }, 'b.yaml', placeOfScalar(source, node, lines));
    return r.ok ? null : [r.problem.line, r.problem.col];
  };

  it('plain, quoted and block scalars', () => {
    expect(problemAt(['resources', 0, 'path'])).toEqual([3, 19]);
    expect(problemAt(['resources', 0, 'mode'])).toEqual([4, 15]);
    expect(problemAt(['resources', 0, 'content'])).toEqual([7, 17]);
  });
});
