import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import git from 'isomorphic-git';
import * as fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createHash, generateKeyPairSync, sign, randomBytes, type KeyObject } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshError } from '../core/errors.js';
import {
  decodePrivateKey, encodePrivateKey, fingerprint, generateKeyPair, gitSigner, parseSshPublicKey,
  publicKeyOf, sameKey, signSsh, sshPublicKey, verifySsh,
} from '../core/sign/sshsig.js';
import { armor, sshString, uint32 } from '../core/sign/wire.js';
import { verifyClaims } from '../core/report/claims.js';

// --- helpers: temp dirs, child processes, OpenSSH key files ---

function withTmp<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = fs.mkdtempSync(join(tmpdir(), 'mesh-sign-'));
  return fn(dir).finally(() => fs.rmSync(dir, { recursive: true, force: true }));
}

/** A clean environment: no ssh-agent, no user or system git config. */
function cleanEnv(home: string): NodeJS.ProcessEnv {
  const { SSH_AUTH_SOCK: _sock, ...rest } = process.env;
  return { ...rest, HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', LC_ALL: 'C' };
}

function run(cmd: string, args: string[], cwd: string, input?: string | Buffer) {
  const r = spawnSync(cmd, args, { cwd, input, env: cleanEnv(cwd), timeout: 10_000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** An unencrypted "openssh-key-v1" private key file, the format ssh-keygen reads and writes. */
function openSshPrivateKey(priv: KeyObject, comment: string): string {
  const jwk = priv.export({ format: 'jwk' });
  const pub = Buffer.from(jwk.x!, 'base64url');
  const seed = Buffer.from(jwk.d!, 'base64url');
  const pubBlob = Buffer.concat([sshString('ssh-ed25519'), sshString(pub)]);
  const check = uint32(0x6d657368);
  let secret = Buffer.concat([
    check, check, sshString('ssh-ed25519'), sshString(pub), sshString(Buffer.concat([seed, pub])), sshString(comment),
  ]);
  for (let pad = 1; secret.length % 8 !== 0; pad++) secret = Buffer.concat([secret, Buffer.from([pad])]);
  const blob = Buffer.concat([
    Buffer.from('openssh-key-v1\0'), sshString('none'), sshString('none'), sshString(''), uint32(1),
    sshString(pubBlob), sshString(secret),
  ]);
  return armor('OPENSSH PRIVATE KEY', blob);
}

/** Writes a key pair where ssh-keygen expects it (private key mode 0600). */
function writeKeyFiles(dir: string, priv: KeyObject): string {
  const path = join(dir, 'id_ed25519');
  fs.writeFileSync(path, openSshPrivateKey(priv, 'node'), { mode: 0o600 });
  fs.writeFileSync(`${path}.pub`, `${sshPublicKey(publicKeyOf(priv), 'node')}\n`);
  return path;
}

/** The decoded blob of an armored signature, and a way back. */
const unarmor = (s: string) => Buffer.from(s.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');
const rearmor = (b: Uint8Array) => armor('SSH SIGNATURE', b);

/** An SSHSIG blob built field by field, for signatures ssh-keygen would never make. */
function customSig(opts: {
  priv: KeyObject; data: string; ns?: string; hash?: string; version?: number; keyType?: string; sigTrailer?: Buffer;
}): string {
  const { priv, data, ns = 'mesh-report', hash = 'sha512', version = 1, keyType = 'ssh-ed25519', sigTrailer = Buffer.alloc(0) } = opts;
  const digest = createHash(hash).update(data).digest();
  const signed = Buffer.concat([Buffer.from('SSHSIG'), sshString(ns), sshString(''), sshString(hash), sshString(digest)]);
  const raw = sign(null, signed, priv);
  const pub = Buffer.from(priv.export({ format: 'jwk' }).x!, 'base64url');
  return rearmor(Buffer.concat([
    Buffer.from('SSHSIG'), uint32(version), sshString(Buffer.concat([sshString(keyType), sshString(pub)])), sshString(ns),
    sshString(''), sshString(hash), sshString(Buffer.concat([sshString(keyType), sshString(raw), sigTrailer])),
  ]));
}

function expectBadKey(fn: () => unknown): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(MeshError);
    expect((e as MeshError).code).toBe('E_BAD_KEY');
    return;
  }
  throw new Error('expected E_BAD_KEY');
}

const DATA = 'status: ok\nnode: web-1\n';

// --- keys ---

describe('keys', () => {
  it('sshPublicKey and parseSshPublicKey round-trip, and sameKey ignores comments', () => {
    const { publicKey } = generateKeyPair();
    const line = sshPublicKey(publicKey, 'node@mesh');
    expect(line).toMatch(/^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI[A-Za-z0-9+/]{43} node@mesh$/);
    expect(sshPublicKey(parseSshPublicKey(line))).toBe(line.replace(/ node@mesh$/, ''));
    expect(sameKey(line, sshPublicKey(publicKey))).toBe(true);
    expect(sameKey(line, `  ${sshPublicKey(publicKey, 'other comment')}\n`)).toBe(true);
    expect(sameKey(line, sshPublicKey(generateKeyPair().publicKey, 'node@mesh'))).toBe(false);
  });

  it('parseSshPublicKey rejects anything but a well-formed ssh-ed25519 line with E_BAD_KEY', () => {
    const good = sshPublicKey(generateKeyPair().publicKey);
    const b64 = good.split(' ')[1]!;
    const blob = Buffer.from(b64, 'base64');
    const rsaLike = Buffer.concat([sshString('ssh-rsa'), sshString(randomBytes(32))]).toString('base64');
    for (const bad of [
      '', 'garbage', 'ssh-ed25519', `ssh-rsa ${b64}`, `ssh-ed25519 ${b64.slice(0, -4)}`, `ssh-ed25519 ${b64}!!`,
      `ssh-ed25519 ${rsaLike}`, `ssh-ed25519 ${Buffer.concat([blob, Buffer.from([0])]).toString('base64')}`,
      `ssh-ed25519 ${blob.subarray(0, 40).toString('base64')}`, `no-pty ${good}`,
    ]) {
      expectBadKey(() => parseSshPublicKey(bad));
    }
    expectBadKey(() => sameKey(good, 'garbage'));
    expectBadKey(() => sshPublicKey(generateKeyPair().publicKey, 'two\nlines'));
  });

  it('encodePrivateKey and decodePrivateKey round-trip through PKCS8 PEM; other input is E_BAD_KEY', () => {
    const { privateKey, publicKey } = generateKeyPair();
    const pem = encodePrivateKey(privateKey);
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const back = decodePrivateKey(pem);
    expect(sshPublicKey(publicKeyOf(back))).toBe(sshPublicKey(publicKey));
    expectBadKey(() => decodePrivateKey('not a key'));
    expectBadKey(() => decodePrivateKey(openSshPrivateKey(privateKey, 'x')));
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    expectBadKey(() => decodePrivateKey(ec.export({ format: 'pem', type: 'pkcs8' }).toString()));
    expectBadKey(() => encodePrivateKey(publicKey));
    expectBadKey(() => signSsh(DATA, ec, 'mesh-report'));
  });

  it('fingerprint matches ssh-keygen -l', () =>
    withTmp(async (dir) => {
      const line = sshPublicKey(generateKeyPair().publicKey, 'node');
      fs.writeFileSync(join(dir, 'k.pub'), `${line}\n`);
      const out = run('ssh-keygen', ['-l', '-E', 'sha256', '-f', 'k.pub'], dir);
      expect(out.status).toBe(0);
      expect(out.stdout.split(' ')[1]).toBe(fingerprint(line));
    }));
});

// --- interop with ssh-keygen ---

describe('ssh-keygen interop', () => {
  it('signSsh output is byte-identical to ssh-keygen -Y sign with the same key', () =>
    withTmp(async (dir) => {
      const { privateKey } = generateKeyPair();
      const key = writeKeyFiles(dir, privateKey);
      fs.writeFileSync(join(dir, 'data'), DATA);
      const out = run('ssh-keygen', ['-Y', 'sign', '-f', key, '-n', 'mesh-report', 'data'], dir);
      expect(out.status, out.stderr).toBe(0);
      expect(signSsh(DATA, privateKey, 'mesh-report')).toBe(fs.readFileSync(join(dir, 'data.sig'), 'utf8'));
    }));

  it('ssh-keygen -Y verify accepts our signature and rejects it after one byte of the data changes', () =>
    withTmp(async (dir) => {
      const { privateKey, publicKey } = generateKeyPair();
      fs.writeFileSync(join(dir, 'allowed_signers'), `node ${sshPublicKey(publicKey)}\n`);
      fs.writeFileSync(join(dir, 'sigfile'), signSsh(DATA, privateKey, 'mesh-report'));
      const args = ['-Y', 'verify', '-f', 'allowed_signers', '-I', 'node', '-n', 'mesh-report', '-s', 'sigfile'];
      const good = run('ssh-keygen', args, dir, DATA);
      expect(good.status, good.stderr).toBe(0);
      expect(good.stdout).toContain('Good "mesh-report" signature for node');
      const bad = run('ssh-keygen', args, dir, DATA.replace('ok', 'ko'));
      expect(bad.status).not.toBe(0);
    }));

  it('verifySsh accepts signatures made by ssh-keygen -Y sign (sha512 and sha256) and names the signer', () =>
    withTmp(async (dir) => {
      expect(run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ops@example', '-f', 'k'], dir).status).toBe(0);
      fs.writeFileSync(join(dir, 'data'), DATA);
      const pub = fs.readFileSync(join(dir, 'k.pub'), 'utf8');
      for (const hash of ['sha512', 'sha256']) {
        expect(run('ssh-keygen', ['-Y', 'sign', '-f', 'k', '-n', 'mesh-report', '-O', `hashalg=${hash}`, 'data'], dir).status).toBe(0);
        const sig = fs.readFileSync(join(dir, 'data.sig'), 'utf8');
        fs.rmSync(join(dir, 'data.sig'));
        const res = verifySsh(DATA, sig, 'mesh-report');
        expect(res).toEqual({ ok: true, publicKey: pub.trim().replace(/ ops@example$/, '') });
        expect(res.ok && sameKey(res.publicKey, pub)).toBe(true);
        expect(verifySsh(Buffer.from(DATA), sig, 'mesh-report').ok).toBe(true);
        expect(verifySsh(`${DATA}x`, sig, 'mesh-report').ok).toBe(false);
      }
    }));
});

// --- interop with git ---

describe('git interop', () => {
  /** An isomorphic-git repository with one commit signed by gitSigner; returns the commit id. */
  async function signedCommit(dir: string, key: KeyObject): Promise<string> {
    await git.init({ fs, dir, defaultBranch: 'main' });
    fs.writeFileSync(join(dir, 'status.json'), '{"ok":true}\n');
    await git.add({ fs, dir, filepath: 'status.json' });
    return git.commit({
      fs, dir, message: 'report from web-1\n',
      author: { name: 'web-1', email: 'web-1@nodes.example', timestamp: 1_700_000_000, timezoneOffset: 0 },
      signingKey: 'x', // isomorphic-git calls onSign only when signingKey is set
      onSign: gitSigner(key),
    });
  }

  const verifyCommit = (dir: string, signers: string, rev = 'HEAD') =>
    run('git', ['-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${signers}`, 'verify-commit', rev], dir);

  it('git verify-commit accepts an isomorphic-git commit signed by gitSigner, with any principal name', () =>
    withTmp(async (dir) => {
      const { privateKey, publicKey } = generateKeyPair();
      await signedCommit(dir, privateKey);
      const signers = join(dir, '.git', 'allowed_signers');
      // the principal is not the committer's e-mail: git looks the key up with find-principals
      fs.writeFileSync(signers, `node@mesh ${sshPublicKey(publicKey)}\n`);
      const out = verifyCommit(dir, signers);
      expect(out.status, out.stderr).toBe(0);
      expect(out.stderr).toContain('Good "git" signature for node@mesh');
      const raw = run('git', ['cat-file', 'commit', 'HEAD'], dir).stdout;
      expect(raw).toMatch(/\ngpgsig -----BEGIN SSH SIGNATURE-----\n( .+\n)+ -----END SSH SIGNATURE-----\n\nreport from web-1\n$/);
    }));

  it('git verify-commit rejects a signed commit whose message was edited', () =>
    withTmp(async (dir) => {
      const { privateKey, publicKey } = generateKeyPair();
      await signedCommit(dir, privateKey);
      const signers = join(dir, '.git', 'allowed_signers');
      fs.writeFileSync(signers, `node@mesh ${sshPublicKey(publicKey)}\n`);
      const raw = run('git', ['cat-file', 'commit', 'HEAD'], dir).stdout;
      const forged = raw.replace('report from web-1', 'report from web-2');
      const oid = run('git', ['hash-object', '-t', 'commit', '-w', '--stdin'], dir, forged).stdout.trim();
      expect(oid).toMatch(/^[0-9a-f]{40}$/);
      const out = verifyCommit(dir, signers, oid);
      expect(out.status).not.toBe(0);
      expect(out.stderr).not.toContain('Good');
    }));

  it('git verify-commit rejects a commit whose key is not in allowed_signers, though the signature is good', () =>
    withTmp(async (dir) => {
      const { privateKey } = generateKeyPair();
      await signedCommit(dir, privateKey);
      const signers = join(dir, '.git', 'allowed_signers');
      fs.writeFileSync(signers, `node@mesh ${sshPublicKey(generateKeyPair().publicKey)}\n`);
      const out = verifyCommit(dir, signers);
      expect(out.status).not.toBe(0);
      // git checks the signature anyway (ssh-keygen -Y check-novalidate) and says why it refuses
      expect(out.stderr).toContain('Good "git" signature with ED25519 key');
      expect(out.stderr).toContain('No principal matched');
      const status = run('git', ['-c', `gpg.ssh.allowedSignersFile=${signers}`, 'log', '-1', '--format=%G?'], dir);
      expect(status.stdout.trim()).toBe('U');
    }));
});

// --- verifySsh on bad input ---

describe('verifySsh rejections', () => {
  const { privateKey, publicKey } = generateKeyPair();
  const good = signSsh(DATA, privateKey, 'mesh-report');

  const rejects = (data: string, sig: string, ns = 'mesh-report') => {
    const res = verifySsh(data, sig, ns);
    expect(res.ok).toBe(false);
    return res.ok ? '' : res.reason;
  };

  it('accepts the good signature and returns the signer key without comment', () => {
    expect(verifySsh(DATA, good, 'mesh-report')).toEqual({ ok: true, publicKey: sshPublicKey(publicKey) });
    expect(verifySsh(DATA, good.replace(/\n/g, '\r\n'), 'mesh-report').ok).toBe(true);
  });

  it('rejects the wrong namespace', () => {
    expect(rejects(DATA, good, 'git')).toMatch(/namespace is "mesh-report", expected "git"/);
  });

  it('rejects a signature whose public key was swapped for another key', () => {
    const blob = unarmor(good);
    const other = Buffer.from(sshPublicKey(generateKeyPair().publicKey).split(' ')[1]!, 'base64');
    const swapped = Buffer.from(blob);
    other.copy(swapped, 14); // "SSHSIG" + version + length of the key blob
    expect(rejects(DATA, rearmor(swapped))).toMatch(/does not match/);
  });

  it('a valid signature by another key verifies but names that key, which sameKey tells apart', () => {
    const stranger = generateKeyPair();
    const res = verifySsh(DATA, signSsh(DATA, stranger.privateKey, 'mesh-report'), 'mesh-report');
    expect(res.ok).toBe(true);
    expect(res.ok && sameKey(res.publicKey, sshPublicKey(publicKey))).toBe(false);
  });

  it('rejects truncated signatures at every length', () => {
    const blob = unarmor(good);
    for (let n = 0; n < blob.length; n++) rejects(DATA, rearmor(blob.subarray(0, n)));
    expect(rejects(DATA, good.slice(0, 100))).toMatch(/does not end with/);
  });

  it('rejects garbage, empty input, trailing bytes and huge length fields', () => {
    expect(rejects(DATA, '')).toMatch(/does not start with/);
    expect(rejects(DATA, 'garbage')).toMatch(/does not start with/);
    expect(rejects(DATA, good.replace('U1NI', 'U1N*'))).toMatch(/base64/);
    expect(rejects(DATA, rearmor(Buffer.from('SSHSAG\0\0\0\x01')))).toMatch(/magic/);
    expect(rejects(DATA, rearmor(Buffer.concat([unarmor(good), Buffer.from([0])])))).toMatch(/trailing/);
    const huge = Buffer.from(unarmor(good));
    huge.writeUInt32BE(0xffffffff, 10); // the public key's length
    expect(rejects(DATA, rearmor(huge))).toMatch(/truncated/);
    expect(rejects(DATA, `-----BEGIN SSH SIGNATURE-----\n${'A'.repeat(1_000_000)}\n-----END SSH SIGNATURE-----\n`)).toMatch(/longer/);
    expect(rejects(DATA, undefined as unknown as string)).toMatch(/not a string/);
  });

  it('accepts sha256 but rejects other hash algorithms, other versions, other key types and padded signatures', () => {
    expect(verifySsh(DATA, customSig({ priv: privateKey, data: DATA, hash: 'sha256' }), 'mesh-report').ok).toBe(true);
    expect(rejects(DATA, customSig({ priv: privateKey, data: DATA, hash: 'sha1' }))).toMatch(/hash algorithm "sha1"/);
    expect(rejects(DATA, customSig({ priv: privateKey, data: DATA, version: 2 }))).toMatch(/version 2/);
    expect(rejects(DATA, customSig({ priv: privateKey, data: DATA, keyType: 'ssh-rsa' }))).toMatch(/key type "ssh-rsa"/);
    expect(rejects(DATA, customSig({ priv: privateKey, data: DATA, sigTrailer: Buffer.from([0]) }))).toMatch(/trailing/);
  });
});

describe('verifyClaims: the report is signed by the node key it names', () => {
  const { privateKey, publicKey } = generateKeyPair();
  const line = sshPublicKey(publicKey);
  const sig = signSsh(DATA, privateKey, 'mesh-report');
  // No node.yaml: a report whose key check passes fails next, on the vouch.
  const reason = (nodeKey: unknown) => verifyClaims('web-1', DATA, sig, { node: 'web-1', generation: 1, nodeKey: nodeKey as string, vouch: '' }, null).reason;
  const OTHER = 'signed by a key other than the node key it names';

  it('the same key passes, with or without a comment and however it is spaced', () => {
    for (const named of [line, `${line} web-1@mesh`, `${line} `, ` ${line}`, line.replace(' ', '\t'), `${line}\tweb-1`]) {
      expect(reason(named), JSON.stringify(named)).toMatch(/no nodes\/web-1\/node\.yaml on main vouches/);
    }
  });

  it('another key, a longer or shorter text, or no key line at all does not', () => {
    const other = sshPublicKey(generateKeyPair().publicKey);
    for (const named of [other, `${line}A`, line.slice(0, -1), `${line.slice(0, -2)}==`, 'ssh-rsa ' + line.split(' ')[1], '', 42, null]) {
      expect(reason(named), JSON.stringify(named)).toBe(OTHER);
    }
  });
});

// --- properties ---

describe('verifySsh properties', () => {
  const { privateKey } = generateKeyPair();
  const DATA_SIG = signSsh(DATA, privateKey, 'mesh-report');
  const BLOB = unarmor(DATA_SIG);

  const mutation = fc.oneof(
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
    fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
    fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
    fc.record({ kind: fc.constant('set32' as const), at: fc.nat(), value: fc.nat({ max: 0xffffffff }) }),
  );

  type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;

  function mutate(blob: Buffer, m: Mutation): Buffer {
    const at = m.at % blob.length;
    const out = Buffer.from(blob);
    switch (m.kind) {
      case 'flip': out[at] = out[at]! ^ (1 << m.bit); return out;
      case 'insert': return Buffer.concat([blob.subarray(0, at), Buffer.from([m.byte]), blob.subarray(at)]);
      case 'delete': return Buffer.concat([blob.subarray(0, at), blob.subarray(at + 1)]);
      case 'set32': if (at + 4 <= out.length) out.writeUInt32BE(m.value, at); return out;
    }
  }

  it('never throws on arbitrary strings and never accepts them', () => {
    const armoredNoise = fc.string().map((s) => `-----BEGIN SSH SIGNATURE-----\n${s}\n-----END SSH SIGNATURE-----\n`);
    const base64Noise = fc.uint8Array({ maxLength: 400 }).map((b) => rearmor(b));
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), armoredNoise, base64Noise), fc.string(), (sig, ns) => {
        expect(verifySsh(DATA, sig, ns).ok).toBe(false);
      }),
      { numRuns: 10_000 },
    );
  });

  it('never throws on mutated signatures and accepts none that changed, nor any over other data', () => {
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), fc.string(), (ms, other) => {
        const blob = ms.reduce(mutate, BLOB);
        const sig = rearmor(blob);
        const same = verifySsh(DATA, sig, 'mesh-report');
        expect(same.ok).toBe(blob.equals(BLOB));
        if (other !== DATA) expect(verifySsh(other, sig, 'mesh-report').ok).toBe(false);
      }),
      { numRuns: 10_000 },
    );
  });

  it('never accepts a mutated armored text over different data', () => {
    fc.assert(
      fc.property(fc.nat(), fc.string({ minLength: 1, maxLength: 1 }), fc.string(), (at, ch, other) => {
        const i = at % DATA_SIG.length;
        const sig = DATA_SIG.slice(0, i) + ch + DATA_SIG.slice(i + 1);
        const res = verifySsh(other === DATA ? `${other}!` : other, sig, 'mesh-report');
        expect(res.ok).toBe(false);
      }),
      { numRuns: 10_000 },
    );
  });
});
