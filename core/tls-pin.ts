/**
 * A TLS certificate pin: the SHA-256 of the server's certificate (DER), as 64 lower-case hex
 * digits, what `openssl x509 -noout -fingerprint -sha256` prints without colons. `mesh-cli serve`
 * prints it, a token for an https fleet URL carries it, and the host trusts exactly that
 * certificate, without a certificate authority.
 */
import { X509Certificate } from 'node:crypto';

/** The pin of the first certificate in `pem`; throws when there is none. */
export function certificatePin(pem: string | Buffer): string {
  return pinOfFingerprint(new X509Certificate(pem).fingerprint256);
}

/** A pin from Node's `fingerprint256` ("AB:CD:…"). */
export function pinOfFingerprint(fingerprint256: string): string {
  return fingerprint256.replace(/:/g, '').toLowerCase();
}
