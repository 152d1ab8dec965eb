/**
 * Hostile input: the YAML/declaration loader and the report and token parsers, fed
 * arbitrary and mutated input, never crash or hang and always answer with problems that
 * carry a file, line and column; the commit-signature check of agent/trust.ts answers any
 * bytes with a verdict, and the commit header reader status uses answers any bytes with null or
 * well-formed ids, and so does the reader of git's ref advertisement status lists branches with. (The SSHSIG parser's own fuzzing is in sign.test.ts.)
 */
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../core/errors.js';
import { commitHeaders, parseCommitObject, trailers } from '../core/git/commit.js';
import { encodePrivateKey, generateKeyPair, publicKeyOf, signSsh, sshPublicKey } from '../core/sign/sshsig.js';
import { verifyCommit } from '../core/trust/check.js';
import { loadYamlOrThrow } from '../core/load.js';
import { DeclarationFile } from '../schema/declaration.js';
import { MeshConfig, NodeIdentity } from '../schema/fleet.js';
import { loadYaml, MAX_FILE_BYTES } from '../core/load.js';
import { Report } from '../schema/report.js';
import { TokenFile } from '../schema/token.js';
import { verifyReport } from '../core/report/verify.js';
import { headsOf } from '../mesh-cli/status/http-direct.js';
import { pktLines } from '../core/git/pkt-line.js';

const RUNS = 10_000;

const validDeclaration = `resources:
  - type: file
    path: /etc/motd
    content: "hi\\n"
    mode: "0644"
  - type: directory
    path: /srv/app
`;

/** Well-formed problems: every one has a place and a message. */
function checkLoaded(result: ReturnType<typeof loadYaml>): void {
  if (result.ok) return;
  expect(result.problems.length).toBeGreaterThan(0);
  for (const p of result.problems) {
    expect(p.file).toBe('f.yaml');
    expect(Number.isInteger(p.line) && p.line >= 1).toBe(true);
    expect(Number.isInteger(p.col) && p.col >= 1).toBe(true);
    expect(typeof p.message).toBe('string');
  }
}

/** The text with one slice replaced by arbitrary characters. */
const mutated = (base: string) =>
  fc.tuple(fc.nat({ max: base.length }), fc.nat({ max: 12 }), fc.string({ maxLength: 12, unit: 'binary' })).map(([at, cut, insert]) => base.slice(0, at) + insert + base.slice(at + cut));

describe('hostile input never crashes a parser', () => {
  for (const [name, schema] of [
    ['declaration', DeclarationFile],
    ['mesh.yaml', MeshConfig],
    ['node.yaml', NodeIdentity],
    ['token file', TokenFile],
    ['report', Report],
  ] as const) {
    it(`the ${name} loader answers arbitrary text with located problems`, () => {
      fc.assert(fc.property(fc.string({ maxLength: 200, unit: 'binary' }), (text) => checkLoaded(loadYaml(text, 'f.yaml', schema))), { numRuns: RUNS });
    });
  }

  it('the declaration loader answers mutations of a valid declaration with a value or located problems', () => {
    fc.assert(fc.property(mutated(validDeclaration), (text) => checkLoaded(loadYaml(text, 'f.yaml', DeclarationFile))), { numRuns: RUNS });
  });

  it('YAML bombs (aliases of aliases) are refused, not expanded', () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`)].join('\n');
    const result = loadYaml(bomb, 'f.yaml', DeclarationFile);
    expect(result.ok).toBe(false);
  });

  it('an oversized file is refused with a message before it is parsed', () => {
    const result = loadYaml('#'.repeat(MAX_FILE_BYTES + 1), 'f.yaml', DeclarationFile);
    expect(result).toEqual({ ok: false, problems: [{ file: 'f.yaml', line: 1, col: 1, message: `file is larger than ${MAX_FILE_BYTES} bytes; split it` }] });
  });

  it('report verification answers arbitrary status and signature text with a verdict, never a crash', () => {
    fc.assert(
      fc.property(fc.option(fc.string({ maxLength: 300 })), fc.option(fc.string({ maxLength: 300 })), (status, sig) => {
        const v = verifyReport('web-1', status, sig, { node: 'web-1', generation: 1 });
        expect(['invalid', 'missing']).toContain(v.signature);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('hostile input never crashes the token file or commit-signature parsers', () => {
  const keys = generateKeyPair();
  const token = stringify({
    kind: 'mesh-token', version: 1, url: 'http://127.0.0.1:1/fleet.git', node: 'web-1', generation: 3, secret: encodePrivateKey(keys.privateKey),
    expires: '2030-01-01T00:00:00.000Z', signers: [`${sshPublicKey(publicKeyOf(keys.privateKey))} op`], trust: 'signed', mainBranch: 'main',
    credential: { username: 'web-1', password: 'x'.repeat(43) },
  });

  /** What enrolment does with a token file: a TokenFile, or an InvalidInputError naming its problems; nothing else. */
  const readToken = (text: string) => {
    try {
      return loadYamlOrThrow(text, 'f.token', TokenFile, 'the token file');
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).problems.length).toBeGreaterThan(0);
      return null;
    }
  };

  it('the token file as enrolment reads it: a valid token parses, and mutations give a token or located problems', () => {
    expect(readToken(token)).toMatchObject({ node: 'web-1', generation: 3, credential: { username: 'web-1' } });
    fc.assert(fc.property(mutated(token), (text) => void readToken(text)), { numRuns: RUNS });
  });

  // A real SSH-signed commit object, the way git writes one: the signature over the commit without its gpgsig header.
  const unsignedCommit = 'tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor op <op@x> 1700000000 +0000\ncommitter op <op@x> 1700000000 +0000\n\nmain: base\n\nMesh-Allow-Rollback: any\n';
  const sig = signSsh(unsignedCommit, keys.privateKey, 'git').trimEnd().split('\n').join('\n ');
  const signed = unsignedCommit.replace('\n\n', `\ngpgsig ${sig}\n\n`);
  const trustedKeys = [{ name: 'op', key: sshPublicKey(publicKeyOf(keys.privateKey)) }];

  it('a signed commit verifies, and any change to its bytes is refused, never a crash', () => {
    expect(verifyCommit(Buffer.from(signed), trustedKeys)).toEqual({ ok: true, signer: { fingerprint: expect.stringMatching(/^SHA256:/), name: 'op' } });
    const parsed = parseCommitObject(Buffer.from(signed));
    expect(parsed.ok && trailers(parsed.commit.message, 'Mesh-Allow-Rollback')).toEqual(['any']);
    fc.assert(
      fc.property(mutated(signed), (text) => {
        const verdict = verifyCommit(Buffer.from(text, 'latin1'), trustedKeys);
        if (verdict.ok) expect(parseCommitObject(Buffer.from(text, 'latin1'))).toMatchObject({ ok: true, commit: { payload: Buffer.from(unsignedCommit) } });
        else expect(verdict.message.length).toBeGreaterThan(0);
      }),
      { numRuns: RUNS },
    );
  });

  it('the header reader status uses answers any bytes with null or well-formed ids, and agrees with the full parser on real commits', () => {
    const oid = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
    const wellFormed = (h: ReturnType<typeof commitHeaders>) => {
      if (h === null) return;
      expect(h.tree).toMatch(oid);
      for (const p of h.parents) expect(p).toMatch(oid);
    };
    const sha256 = `tree ${'ab'.repeat(32)}\nparent ${'cd'.repeat(32)}\nparent ${'ef'.repeat(32)}\nauthor a <a@x> 1 +0000\ncommitter a <a@x> 1 +0000\n\nm\n`;
    for (const text of [signed, signed.replace('\nauthor', `\nparent ${'1'.repeat(40)}\nauthor`), sha256]) {
      const full = parseCommitObject(Buffer.from(text));
      expect(full.ok).toBe(true);
      if (full.ok) expect(commitHeaders(Buffer.from(text))).toEqual({ tree: full.commit.tree, parents: full.commit.parents, message: full.commit.message });
    }
    fc.assert(fc.property(mutated(signed), (text) => wellFormed(commitHeaders(Buffer.from(text, 'latin1')))), { numRuns: RUNS });
    fc.assert(fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => wellFormed(commitHeaders(bytes))), { numRuns: RUNS });
  });

  it('the ref advertisement reader status lists branches with answers any bytes with null or branches and ids, and reads a real one', () => {
    const oid = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
    const pkt = (line: string) => (Buffer.byteLength(line) + 4).toString(16).padStart(4, '0') + line;
    const [a, b] = ['1'.repeat(40), '2'.repeat(40)];
    const advert = pkt('# service=git-upload-pack\n') + '0000' + pkt(`${a} HEAD\0multi_ack symref=HEAD:refs/heads/main agent=git/2.47\n`)
      + pkt(`${a} refs/heads/main\n`) + pkt(`${b} refs/heads/reports/web-1\n`) + pkt(`${b} refs/tags/v1\n`) + pkt(`${a} refs/tags/v1^{}\n`) + '0000';
    expect(headsOf(Buffer.from(advert))).toEqual(new Map([['refs/heads/main', a], ['refs/heads/reports/web-1', b]]));
    const empty = pkt('# service=git-upload-pack\n') + '0000' + pkt(`${'0'.repeat(40)} capabilities^{}\0agent=git/2.47\n`) + '0000';
    expect(headsOf(Buffer.from(empty))).toEqual(new Map());
    for (const cut of [advert.slice(0, -4), advert.slice(0, -10), advert + '0000', advert.replace('# service', '# servic_')]) expect(headsOf(Buffer.from(cut))).toBeNull();
    const wellFormed = (heads: Map<string, string> | null) => {
      for (const [ref, id] of heads ?? []) {
        expect(ref.startsWith('refs/heads/')).toBe(true);
        expect(id).toMatch(oid);
      }
    };
    fc.assert(fc.property(mutated(advert), (text) => wellFormed(headsOf(Buffer.from(text, 'latin1')))), { numRuns: RUNS });
    fc.assert(fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => wellFormed(headsOf(Buffer.from(bytes)))), { numRuns: RUNS });
    // The same answer as a reader of each pkt-line as its own Buffer (pktLines) and UTF-8 text, a ref name that is not ASCII included.
    const other = advert.replace('0000', '0000' + pkt(`${b} refs/heads/reports/café\n`) + pkt(`${a} refs/heads/\u00e9t\u00e9 x\n`));
    expect(headsOf(Buffer.from(other.replace(pkt(`${a} refs/heads/\u00e9t\u00e9 x\n`), '')))?.get('refs/heads/reports/café')).toBe(b);
    for (const text of [advert, empty, other]) {
      expect(headsOf(Buffer.from(text))).toEqual(headsByLine(Buffer.from(text)));
      fc.assert(fc.property(mutated(text), (t) => {
        expect(headsOf(Buffer.from(t, 'latin1'))).toEqual(headsByLine(Buffer.from(t, 'latin1')));
      }), { numRuns: RUNS });
    }
  });

  it('arbitrary bytes get a verdict from the commit-signature check, and a message for every refusal', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => {
        const verdict = verifyCommit(bytes, trustedKeys);
        expect(verdict.ok).toBe(false);
        if (!verdict.ok) expect(['E_BAD_COMMIT', 'E_UNSIGNED', 'E_BAD_SIGNATURE', 'E_UNTRUSTED_SIGNER']).toContain(verdict.code);
        trailers(Buffer.from(bytes).toString('utf8'), 'Mesh-Allow-Rollback');
      }),
      { numRuns: RUNS },
    );
  });
});

/** The ref advertisement read one pkt-line at a time, each its own Buffer decoded as UTF-8: what headsOf read before it walked one string. */
function headsByLine(body: Buffer): Map<string, string> | null {
  const heads = new Map<string, string>();
  let part = 0;
  try {
    for (const p of pktLines(body)) {
      if (part === 3) return null;
      if (typeof p === 'number') {
        if (p !== 0 || part === 0) return null;
        part = part === 1 ? 2 : 3;
        continue;
      }
      if (part === 0) {
        if (p.toString('latin1') !== '# service=git-upload-pack\n') return null;
        part = 1;
        continue;
      }
      if (part === 1) return null;
      const line = p.toString('utf8').replace(/\n$/, '').split('\0')[0]!;
      const ref = /^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$/.exec(line);
      if (!ref) return null;
      if (ref[2]!.startsWith('refs/heads/') && !ref[2]!.endsWith('^{}')) heads.set(ref[2]!, ref[1]!);
    }
  } catch {
    return null;
  }
  return part === 3 ? heads : null;
}
