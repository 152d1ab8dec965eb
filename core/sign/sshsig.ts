/**
 * OpenSSH signatures (SSHSIG, PROTOCOL.sshsig) with ed25519 keys, in node:crypto only.
 *
 * An SSHSIG is the armored blob: "SSHSIG" (6 bytes), uint32 version 1, string public key
 * blob, string namespace, string reserved, string hash algorithm, string signature. The
 * signature (itself string "ssh-ed25519" + string 64 bytes) is made over a second blob:
 * "SSHSIG", string namespace, string reserved, string hash algorithm, string H(message).
 * The namespace keeps a signature made for one purpose ("git", "mesh-report") from being
 * replayed for another. Ed25519 is deterministic, so signSsh() gives byte for byte what
 * `ssh-keygen -Y sign` gives for the same key, namespace and message.
 */
import { createHash, createPrivateKey, createPublicKey, hash as digestOf, randomBytes, sign, verify, type KeyObject } from 'node:crypto';
import { ed25519Blob } from '../../schema/signing.js';
import { MeshError } from '../errors.js';
import { armor, dearmor, sshString, uint32, WireError, WireReader } from './wire.js';

const MAGIC = Buffer.from('SSHSIG');
const KEY_TYPE = 'ssh-ed25519';
const LABEL = 'SSH SIGNATURE';
const MAX_ARMORED = 64 * 1024; // a real ed25519 signature is ~300 characters

/** PKCS#8 DER of an ed25519 private key, up to its 32-byte seed (RFC 8410). */
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * A fresh ed25519 key pair, made from 32 random bytes rather than with generateKeyPairSync:
 * Node 20.20 can deadlock when the garbage collector frees a finished key-generation job while
 * another key of that job is being exported (seen here after a few hundred keys in one process).
 */
export function generateKeyPair(): { privateKey: KeyObject; publicKey: KeyObject } {
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, randomBytes(32)]), format: 'der', type: 'pkcs8' });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

/** The key as an OpenSSH authorized_keys line: "ssh-ed25519 AAAAC3... comment". */
export function sshPublicKey(pub: KeyObject, comment?: string): string {
  if (comment !== undefined && /[\r\n]/.test(comment)) throw badKey('an ssh key comment must be a single line');
  const line = `${KEY_TYPE} ${keyBlob(pub).toString('base64')}`;
  return comment ? `${line} ${comment}` : line;
}

/** Reads "ssh-ed25519 BASE64 [comment]"; throws MeshError E_BAD_KEY on anything else. */
export function parseSshPublicKey(line: string): KeyObject {
  return publicKeyFromBlob(blobOfLine(line));
}

/** Whether two ssh public key lines name the same key, comments aside (E_BAD_KEY if either is malformed). */
export function sameKey(a: string, b: string): boolean {
  // Both lines must be well-formed ed25519 keys (E_BAD_KEY otherwise); then equal blobs are the same key.
  // The shape is checked without making a KeyObject (~20 µs each, and status compares 10,000 keys a run).
  const [x, y] = [ed25519Blob(a) ?? blobOfLine(a), ed25519Blob(b) ?? blobOfLine(b)];
  return x.equals(y);
}

/** Whether two key lines are the same well-formed ed25519 key; false, not E_BAD_KEY, when either is not one (a report or a file may say anything). */
export function sameKeyIfWellFormed(a: string, b: string): boolean {
  const x = ed25519Blob(a);
  const y = x && ed25519Blob(b);
  return y !== null && x!.equals(y);
}

/** The private key as PKCS8 PEM ("-----BEGIN PRIVATE KEY-----"). */
export function encodePrivateKey(k: KeyObject): string {
  if (k.type !== 'private' || k.asymmetricKeyType !== 'ed25519') throw badKey('expected an ed25519 private key');
  return k.export({ format: 'pem', type: 'pkcs8' }).toString();
}

/** Reads an unencrypted PKCS8 PEM ed25519 private key; throws MeshError E_BAD_KEY otherwise. */
export function decodePrivateKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (e) {
    throw badKey('not a readable PKCS8 PEM private key ("-----BEGIN PRIVATE KEY-----", no passphrase)', e);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw badKey(`expected an ed25519 private key, got ${key.asymmetricKeyType}`);
  return key;
}

/** The public half of a private key. */
export function publicKeyOf(priv: KeyObject): KeyObject {
  return createPublicKey(priv);
}

/** An armored SSHSIG over data, identical to `ssh-keygen -Y sign -n namespace`'s output. */
export function signSsh(data: string | Uint8Array, privateKey: KeyObject, namespace: string): string {
  if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'ed25519') throw badKey('expected an ed25519 private key');
  if (namespace === '') throw new MeshError('E_BAD_NAMESPACE', 'an SSH signature needs a non-empty namespace');
  const toSign = signedBlob(namespace, Buffer.alloc(0), 'sha512', toBytes(data));
  const sig = Buffer.concat([sshString(KEY_TYPE), sshString(sign(null, toSign, privateKey))]);
  const blob = Buffer.concat([
    MAGIC, uint32(1), sshString(keyBlob(privateKey)), sshString(namespace), sshString(''), sshString('sha512'), sshString(sig),
  ]);
  return armor(LABEL, blob);
}

/** Checks an armored SSHSIG over data; never throws. The caller decides whether publicKey is trusted. */
export function verifySsh(
  data: string | Uint8Array,
  armored: string,
  namespace: string,
): { ok: true; publicKey: string } | { ok: false; reason: string } {
  try {
    if (typeof armored !== 'string') return { ok: false, reason: 'signature is not a string' };
    const r = new WireReader(dearmor(LABEL, armored, MAX_ARMORED));
    if (!r.bytes(MAGIC.length, 'magic').equals(MAGIC)) return { ok: false, reason: 'not an SSHSIG blob (bad magic)' };
    const version = r.uint32('version');
    if (version !== 1) return { ok: false, reason: `unsupported SSHSIG version ${version}` };
    const pubBlob = r.string('public key');
    const ns = r.string('namespace');
    const reserved = r.string('reserved');
    const hash = r.text('hash algorithm');
    const sig = new WireReader(r.string('signature'));
    r.end('signature blob');
    if (!ns.equals(namespaceBytes(namespace))) {
      return { ok: false, reason: `namespace is "${ns.toString('utf8').slice(0, 64)}", expected "${namespace}"` };
    }
    if (hash !== 'sha512' && hash !== 'sha256') return { ok: false, reason: `unsupported hash algorithm "${hash.slice(0, 64)}"` };
    const pub = verifyingKey(pubBlob); // throws E_BAD_KEY for non-ed25519 keys
    if (sig.text('signature type') !== KEY_TYPE) return { ok: false, reason: 'signature type is not ssh-ed25519' };
    const raw = sig.string('signature');
    sig.end('signature');
    if (raw.length !== 64) return { ok: false, reason: 'ed25519 signature is not 64 bytes' };
    const good = verify(null, signedBlob(ns, reserved, hash, toBytes(data)), pub, raw);
    if (!good) return { ok: false, reason: 'signature does not match the data and key' };
    return { ok: true, publicKey: `${KEY_TYPE} ${pubBlob.toString('base64')}` };
  } catch (e) {
    if (e instanceof WireError || (e instanceof MeshError && e.code === 'E_BAD_KEY')) return { ok: false, reason: e.message };
    return { ok: false, reason: `unreadable signature: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** An isomorphic-git onSign callback that signs commits with SSHSIG, namespace "git". */
export function gitSigner(privateKey: KeyObject): ({ payload }: { payload: string }) => Promise<{ signature: string }> {
  if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'ed25519') throw badKey('expected an ed25519 private key');
  return async ({ payload }) => ({ signature: signSsh(payload, privateKey, 'git') });
}

/** "SHA256:..." as `ssh-keygen -l` prints it: unpadded base64 of sha256 over the key blob. */
export function fingerprint(line: string): string {
  return `SHA256:${createHash('sha256').update(blobOfLine(line)).digest('base64').replace(/=+$/, '')}`;
}

// --- helpers ---

function badKey(message: string, cause?: unknown): MeshError {
  return new MeshError('E_BAD_KEY', message, { cause });
}

function toBytes(data: string | Uint8Array): Buffer {
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** The blob that is actually signed (PROTOCOL.sshsig, "Signed Data"), made in one buffer (status verifies 10,000 a run). */
function signedBlob(namespace: string | Buffer, reserved: Buffer, hash: string, message: Buffer): Buffer {
  const digest = digestOf(hash, message, 'buffer');
  const ns = typeof namespace === 'string' ? namespaceBytes(namespace) : namespace;
  const out = Buffer.allocUnsafe(MAGIC.length + 16 + ns.length + reserved.length + hash.length + digest.length);
  let at = MAGIC.copy(out, 0);
  for (const field of [ns, reserved, hash, digest]) {
    at = out.writeUInt32BE(typeof field === 'string' ? Buffer.byteLength(field) : field.length, at);
    at += typeof field === 'string' ? out.write(field, at, 'utf8') : field.copy(out, at);
  }
  return out;
}

/** A namespace's bytes, made once per namespace. */
const namespaces = new Map<string, Buffer>();
function namespaceBytes(namespace: string): Buffer {
  let bytes = namespaces.get(namespace);
  if (!bytes) namespaces.set(namespace, (bytes = Buffer.from(namespace, 'utf8')));
  return bytes;
}

/**
 * The key of an ed25519 key blob as crypto.verify takes it (checked as publicKeyFromBlob checks
 * it): a JWK, which verify imports itself, ~6 µs cheaper than a KeyObject made first.
 */
function verifyingKey(blob: Buffer): { key: { kty: 'OKP'; crv: 'Ed25519'; x: string }; format: 'jwk' } {
  const r = new WireReader(blob);
  let raw: Buffer;
  try {
    const type = r.text('key type');
    if (type !== KEY_TYPE) throw badKey(`unsupported key type "${type.slice(0, 40)}", only ssh-ed25519 is accepted`);
    raw = r.string('ed25519 key');
    r.end('key blob');
  } catch (e) {
    if (e instanceof MeshError) throw e;
    throw badKey(`malformed ssh public key: ${e instanceof Error ? e.message : String(e)}`, e);
  }
  if (raw.length !== 32) throw badKey('an ed25519 public key must be 32 bytes');
  return { key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' };
}

/** The OpenSSH public key blob of an ed25519 key (public or private): string type, string 32 bytes. */
function keyBlob(k: KeyObject): Buffer {
  if (k.asymmetricKeyType !== 'ed25519') throw badKey(`expected an ed25519 key, got ${k.asymmetricKeyType}`);
  const x = k.export({ format: 'jwk' }).x;
  if (x === undefined) throw badKey('ed25519 key has no public part');
  return Buffer.concat([sshString(KEY_TYPE), sshString(Buffer.from(x, 'base64url'))]);
}

/** The key blob of "ssh-ed25519 BASE64 [comment]", checked to be a well-formed ed25519 key. */
function blobOfLine(line: string): Buffer {
  const [type, b64] = typeof line === 'string' ? line.trim().split(/\s+/, 2) : [];
  if (type !== KEY_TYPE || b64 === undefined) {
    throw badKey(`expected an ssh public key line "ssh-ed25519 AAAA... [comment]", got "${String(line).slice(0, 40)}"`);
  }
  const blob = Buffer.from(b64, 'base64');
  if (blob.toString('base64') !== b64) throw badKey('ssh public key is not valid base64');
  publicKeyFromBlob(blob);
  return blob;
}

/** A KeyObject from an OpenSSH ed25519 key blob; E_BAD_KEY if it is anything else. */
function publicKeyFromBlob(blob: Buffer): KeyObject {
  try {
    const r = new WireReader(blob);
    const type = r.text('key type');
    if (type !== KEY_TYPE) throw badKey(`unsupported key type "${type.slice(0, 40)}", only ssh-ed25519 is accepted`);
    const raw = r.string('ed25519 key');
    r.end('key blob');
    if (raw.length !== 32) throw badKey('an ed25519 public key must be 32 bytes');
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
  } catch (e) {
    if (e instanceof MeshError) throw e;
    throw badKey(`malformed ssh public key: ${e instanceof Error ? e.message : String(e)}`, e);
  }
}
