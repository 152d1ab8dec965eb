/**
 * The secrets format and lookup, pure: secrets.yaml at nodes/, group and node level with the
 * closer level replacing the whole entry (as vars.yaml), stand-ins in every render that does not
 * decrypt, secrets only in template bodies, problems at file:line:column, and who cannot read a
 * secret from its recipient list alone.
 */
import { describe, expect, it } from 'vitest';
import { renderDeclaration } from '../core/declaration/render.js';
import { placeOfDir } from '../core/fleet/layout.js';
import { decryptWith, encryptTo, newIdentity, quietX25519 } from '../core/secrets/age.js';
import { nodeSecrets } from '../core/secrets/levels.js';
import { placeholderOf } from '../core/secrets/placeholder.js';
import { cannotRead, remedy, sameRecipients, wantedRecipients } from '../core/secrets/recipients.js';
import { masked } from '../agent/resources/program-output.js';
import { PLACEHOLDER_FACTS } from '../schema/facts.js';
import { fromFiles } from '../mesh-cli/tree.js';
import { markSensitive, sealRecord } from '../agent/store/seal.js';
import type { OwnedRecord } from '../schema/report.js';
import { tempDirs } from './helpers/tmp.js';
import { join } from 'node:path';

const BLOCK = (n: string) => `-----BEGIN AGE ENCRYPTED FILE-----\nYWdl${n}\n-----END AGE ENCRYPTED FILE-----\n`;
const R1 = 'age1' + 'q'.repeat(58);
const R2 = 'age1' + 'p'.repeat(58);
const entry = (n: string, node = 'db-1', r = R1) => `  recipients:\n    - {node: ${node}, recipient: ${r}}\n  value: |\n    -----BEGIN AGE ENCRYPTED FILE-----\n    YWdl${n}\n    -----END AGE ENCRYPTED FILE-----\n`;
const tree = (files: Record<string, string>) => fromFiles(new Map(Object.entries(files)));
const read = (t: ReturnType<typeof tree>) => (p: string) => t.read(p);
const DB1 = placeOfDir('nodes/db/db-1');

describe('secrets.yaml levels', () => {
  it('layers nodes/, the groups and the node: the closer level replaces the whole entry, null unsets it', async () => {
    const t = tree({
      'nodes/secrets.yaml': `api_key:\n${entry('A')}db_password:\n${entry('B')}old:\n${entry('C')}`,
      'nodes/db/secrets.yaml': `# the database's own\ndb_password:\n${entry('D', 'db-1', R2)}`,
      'nodes/db/db-1/secrets.yaml': 'old: null\n',
    });
    const { secrets, files, problems } = await nodeSecrets(read(t), DB1);
    expect(problems).toEqual([]);
    expect(files).toEqual(['nodes/secrets.yaml', 'nodes/db/secrets.yaml', 'nodes/db/db-1/secrets.yaml']);
    expect([...secrets.keys()]).toEqual(['api_key', 'db_password']);
    expect(secrets.get('db_password')).toEqual({ name: 'db_password', file: 'nodes/db/secrets.yaml', level: 'nodes/db', line: 2, col: 1, entry: { recipients: [{ node: 'db-1', recipient: R2 }], value: BLOCK('D') } });
    expect(secrets.get('api_key')).toMatchObject({ file: 'nodes/secrets.yaml', level: 'nodes', line: 1, col: 1 });
  });

  it('names every problem of a file at its line and column', async () => {
    const t = tree({
      'nodes/secrets.yaml': `db_password:\n  recipients: []\n  value: plain text\n`,
      'nodes/db/secrets.yaml': `bad-name:\n${entry('A')}`,
      'nodes/db/db-1/secrets.yaml': `x:\n  recipients:\n    - {node: db-1, recipient: nope}\n  value: |\n    ${BLOCK('A').trim().replace(/\n/g, '\n    ')}\n`,
    });
    const { problems } = await nodeSecrets(read(t), DB1);
    expect(problems.map((p) => `${p.file}:${p.line}:${p.col}`)).toEqual(['nodes/secrets.yaml:3:10', 'nodes/db/secrets.yaml:1:1', 'nodes/db/db-1/secrets.yaml:3:31']);
    expect(problems[0]!.message).toMatch(/armored age block/);
    expect(problems[1]!.message).toMatch(/a secret name is letters, digits and _/);
  });
});

describe('secrets in templates', () => {
  const files = (body: string, extra: Record<string, string> = {}) => tree({ 'nodes/db/db-1/node.yaml': 'node: db-1\ngeneration: 1\n', 'nodes/db/secrets.yaml': `db_password:\n${entry('D')}`, 'nodes/db/app.yaml': body, ...extra });

  it('renders a stand-in, marks the resource, and takes the value only when it is handed in', async () => {
    const t = files('resources:\n  - type: file\n    path: /etc/db.conf\n    template: true\n    content: "pw={{ secrets.db_password | upcase }}\\n"\n  - type: file\n    path: /etc/motd\n    content: "hi\\n"\n');
    const stand = await renderDeclaration(t, DB1, PLACEHOLDER_FACTS);
    if (!stand.ok) throw new Error(JSON.stringify(stand.problems));
    expect(stand.declaration.readSecrets).toEqual({ 'file:/etc/db.conf': ['db_password'] });
    expect(stand.declaration.resources[0]).toMatchObject({ content: `pw=${placeholderOf('db_password', BLOCK('D')).toUpperCase()}\n` });
    expect(stand.declaration.files).toContain('nodes/db/secrets.yaml');
    const real = await renderDeclaration(t, DB1, PLACEHOLDER_FACTS, { db_password: 'hunter2' });
    expect(real.ok && real.declaration.resources[0]).toMatchObject({ content: 'pw=HUNTER2\n' });
    expect(real.ok && real.declaration.digest).not.toBe(stand.declaration.digest);
  });

  it("a user's password may read a secret with template: true: its stand-in until the host hands the value in, which must then be a hash", async () => {
    const user = (template: string) => `resources:\n  - type: user\n    name: app\n${template}    password: "{{ secrets.db_password }}"\n`;
    const stand = await renderDeclaration(files(user('    template: true\n')), DB1, PLACEHOLDER_FACTS);
    if (!stand.ok) throw new Error(JSON.stringify(stand.problems));
    expect(stand.declaration.readSecrets).toEqual({ 'user:app': ['db_password'] });
    expect(stand.declaration.resources[0]).toMatchObject({ password: placeholderOf('db_password', BLOCK('D')) });
    // As 'openssl passwd -6 | mesh-cli secret set' gives it: with its line break, which a hash never holds.
    const real = await renderDeclaration(files(user('    template: true\n')), DB1, PLACEHOLDER_FACTS, { db_password: '$6$salt$hash\n' });
    expect(real.ok && real.declaration.resources[0]).toMatchObject({ password: '$6$salt$hash' });
    const plain = await renderDeclaration(files(user('    template: true\n')), DB1, PLACEHOLDER_FACTS, { db_password: 'hunter2' });
    expect(!plain.ok && plain.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`)).toEqual([
      "nodes/db/app.yaml:5:15: resources.0.password: password is the hash etc/shadow holds, as 'openssl passwd -6' or 'mkpasswd -m yescrypt' prints it (starting with $), or ! for no password: never the password itself",
    ]);
    // Without template: true the body is not rendered, and the error says what to add.
    const literal = await renderDeclaration(files(user('')), DB1, PLACEHOLDER_FACTS);
    expect(!literal.ok && literal.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`)).toEqual(['nodes/db/app.yaml:4:15: resources.0.password: password is a template, rendered only with template: true: add template: true to this user']);
  });

  it('a new block changes the stand-in (and so the digest); the same block keeps it', () => {
    expect(placeholderOf('db_password', BLOCK('D'))).toBe(placeholderOf('db_password', BLOCK('D')));
    expect(placeholderOf('db_password', BLOCK('E'))).not.toBe(placeholderOf('db_password', BLOCK('D')));
    expect(placeholderOf('db_password', BLOCK('D'))).toMatch(/^\[secret db_password [0-9a-f]{16}\]$/);
  });

  it('an unknown secret is an error at its file:line:column, and so is a secret outside a template body', async () => {
    const unknown = await renderDeclaration(files('resources:\n  - type: file\n    path: /etc/x\n    template: true\n    content: "{{ secrets.nope }}"\n'), DB1, PLACEHOLDER_FACTS);
    expect(!unknown.ok && unknown.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`)).toEqual([
      "nodes/db/app.yaml:5:18: unknown variable secrets.nope: set it with 'mesh-cli secret set nope --level PATH' (a secrets.yaml at nodes/, one of the node's groups or the node)",
    ]);
    const short = await renderDeclaration(files('resources:\n  - type: file\n    path: "/etc/{{ secrets.db_password }}"\n    content: x\n'), DB1, PLACEHOLDER_FACTS);
    expect(!short.ok && short.problems.map((p) => `${p.file}:${p.line}:${p.col}`)).toEqual(['nodes/db/app.yaml:3:11']);
    expect(!short.ok && short.problems[0]!.message).toMatch(/^secrets\.db_password is read here, but a secret may be read only in a body/);
  });

  it('a literal body naming a secret is copied as it is, with a warning', async () => {
    const r = await renderDeclaration(files('resources:\n  - type: file\n    path: /etc/x\n    content: "{{ secrets.db_password }}"\n'), DB1, PLACEHOLDER_FACTS);
    expect(r.ok && r.declaration.readSecrets).toEqual({});
    expect(r.ok && r.declaration.warnings.map((w) => w.message)).toEqual(["this body holds '{{ secrets.' but is copied literally: add template: true to render it (or leave it, if the braces are the file's own)"]);
  });
});

describe('who can read a secret, from its list alone', () => {
  const places = new Map([['db-1', placeOfDir('nodes/db/db-1')], ['db-2', placeOfDir('nodes/db/eu/db-2')], ['web-1', placeOfDir('nodes/web/web-1')]]);
  const placed = (recipients: Array<{ node: string; recipient: string }>) => ({ name: 'db_password', file: 'nodes/db/secrets.yaml', level: 'nodes/db', line: 1, col: 1, entry: { recipients, value: BLOCK('D') } });

  it('wants every node at or below the level that reported a recipient, and the operators', () => {
    const current = new Map([['db-1', R1], ['db-2', null], ['web-1', R2]]);
    expect(wantedRecipients('nodes/db', places, current, [{ name: 'alice', recipient: R2 }])).toEqual({ recipients: [{ node: 'db-1', recipient: R1 }, { operator: 'alice', recipient: R2 }], missing: ['db-2'] });
    expect(wantedRecipients('nodes', places, current, []).recipients.map((r) => ('node' in r ? r.node : ''))).toEqual(['db-1', 'web-1']);
    expect(sameRecipients([{ node: 'a', recipient: R1 }, { operator: 'o', recipient: R2 }], [{ operator: 'o', recipient: R2 }, { node: 'a', recipient: R1 }])).toBe(true);
    expect(sameRecipients([{ node: 'a', recipient: R1 }], [{ node: 'a', recipient: R2 }])).toBe(false);
  });

  it('names a node that is not listed, or listed with a recipient it no longer has; without its recipient, being listed is enough', () => {
    const s = placed([{ node: 'db-1', recipient: R1 }]);
    expect(cannotRead(s, 'db-1', new Map([['db-1', R1]]))).toBeNull();
    expect(cannotRead(s, 'db-1', new Map([['db-1', R2]]))).toBe(`secret db_password is not encrypted to db-1's current recipient (db-1 re-enrolled since: its newest report names ${R2}); no operator is among its recipients, so rekey cannot open it: set it again with mesh-cli secret set db_password --level db`);
    expect(cannotRead(s, 'db-2', new Map())).toBe("secret db_password is not encrypted to db-2 (it is not in the secret's recipients); no operator is among its recipients, so rekey cannot open it: set it again with mesh-cli secret set db_password --level db");
    expect(cannotRead(s, 'db-1', new Map())).toBeNull();
  });

  it('says rekey when an operator is among the recipients, and set again, at the level, when none is', () => {
    const withOperator = { ...placed([{ node: 'db-1', recipient: R1 }]), entry: { recipients: [{ node: 'db-1', recipient: R1 }, { operator: 'alice', recipient: R2 }], value: BLOCK('D') } };
    expect(cannotRead(withOperator, 'db-2', new Map())).toBe("secret db_password is not encrypted to db-2 (it is not in the secret's recipients); run mesh-cli secret rekey");
    expect(remedy({ ...placed([]), level: 'nodes' })).toBe('no operator is among its recipients, so rekey cannot open it: set it again with mesh-cli secret set db_password');
    expect(remedy({ ...placed([]), level: 'nodes/db/eu/db-2' })).toBe('no operator is among its recipients, so rekey cannot open it: set it again with mesh-cli secret set db_password --level db/eu/db-2');
  });
});

describe('age blocks and masking', () => {
  it('encrypts to several recipients; an identity not among them opens nothing', async () => {
    const [a, b, c] = [await newIdentity(), await newIdentity(), await newIdentity()];
    const block = await encryptTo([a.recipient, b.recipient], 'hunter2');
    expect(await decryptWith(a.identity, block)).toBe('hunter2');
    expect(await decryptWith(b.identity, block)).toBe('hunter2');
    expect(await decryptWith(c.identity, block)).toBeNull();
  });

  it('masks a value as it is, in base64 and in hex', () => {
    const v = 'hunter2-long';
    const text = `pw=${v} b64=${Buffer.from(v).toString('base64')} hex=${Buffer.from(v).toString('hex')} HEX=${Buffer.from(v).toString('hex').toUpperCase()}`;
    expect(masked(text, [v])).toBe('pw=[secret masked] b64=[secret masked] hex=[secret masked] HEX=[secret masked]');
    expect(masked(text, undefined)).toBe(text);
  });
});

describe('what the store keeps of a resource that read a secret', () => {
  const tempDir = tempDirs();
  const record = (resource: Record<string, unknown>, prior: OwnedRecord['prior']): OwnedRecord => ({ id: `${resource.type}:x`, type: String(resource.type), resource, prior, state: 'verified', at: '2026-12-07T00:00:00.000Z' });

  it("seals its bodies (a user's password among them) and keeps no earlier password or content; a resource that read none is kept as it is", () => {
    const store = join(tempDir('mesh-seal-'), 'store.json');
    const user = markSensitive({ type: 'user', name: 'app', password: '$6$salt$hash', shell: '/bin/bash', template: true });
    const sealed = sealRecord(record(user, { existed: true, state: { uid: 2000, shell: '/bin/sh', password: '$6$old$hash' } }), store);
    expect(JSON.parse(JSON.stringify(sealed.resource))).toEqual({ type: 'user', name: 'app', password: expect.stringMatching(/^hmac-sha256:[0-9a-f]{64}$/), shell: '/bin/bash', template: true });
    expect(sealed.prior).toEqual({ existed: true, state: { uid: 2000, shell: '/bin/sh' } });
    const file = sealRecord(record(markSensitive({ type: 'file', path: '/etc/x', content: 'pw' }), { existed: true, state: { content: 'old' } }), store);
    expect(file.prior).toEqual({ existed: true, known: false });
    const plain = record({ type: 'user', name: 'app', password: '$6$salt$hash' }, { existed: true, state: { password: '$6$old$hash' } });
    expect(sealRecord(plain, store)).toBe(plain);
  });
});

describe("Node's warning about its X25519", () => {
  it('is dropped (Node 20.19, Debian 13, calls it experimental at its first use); any other warning still comes through', async () => {
    const seen: string[] = [];
    const onWarning = (w: Error) => seen.push(w.message);
    process.on('warning', onWarning);
    try {
      quietX25519();
      process.emitWarning('The X25519 Web Crypto API algorithm is an experimental feature and might change at any time', 'ExperimentalWarning');
      process.emitWarning('mesh test: another warning', 'MeshTestWarning');
      await new Promise((r) => setTimeout(r, 10)); // warnings are emitted on a later tick
    } finally {
      process.off('warning', onWarning);
    }
    expect(seen).toEqual(['mesh test: another warning']);
  });
});
