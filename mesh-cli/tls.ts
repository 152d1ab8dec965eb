/**
 * The certificate pin a token carries. A fleet served over https with a self-signed certificate
 * (`mesh-cli serve --tls-cert`) is one the operator's git must be told to trust:
 * `git config http.sslCAInfo CERT` in the fleet checkout. That same certificate is what the
 * hosts should trust, so a token for an https URL pins it (core/tls-pin.ts). A server whose
 * certificate a public CA signed needs neither: hosts check it against the system's CAs.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { MeshError, messageOf } from '../core/errors.js';
import { certificatePin } from '../core/tls-pin.js';
import { git } from './git.js';

/** For an https `url`: the pin of the one certificate the checkout at `dir` trusts for it (http.sslCAInfo); otherwise none. */
export async function tokenPin(dir: string, url: string): Promise<string | undefined> {
  if (!/^https:/i.test(url)) return undefined;
  const file = (await git(dir, ['config', '--type=path', '--get-urlmatch', 'http.sslCAInfo', url]).catch(() => '')).trim();
  if (!file) return undefined;
  let pem: string;
  try {
    pem = readFileSync(resolve(dir, file), 'utf8');
  } catch (e) {
    throw new MeshError('E_TLS_PIN', `cannot read ${file}, the certificate the fleet checkout trusts for ${url} (git config http.sslCAInfo): ${messageOf(e)}`);
  }
  // A bundle of CAs is not a server's own certificate: nothing to pin.
  if ((pem.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length !== 1) return undefined;
  try {
    return certificatePin(pem);
  } catch (e) {
    throw new MeshError('E_TLS_PIN', `${file} (git config http.sslCAInfo) is not a PEM certificate: ${messageOf(e)}`);
  }
}
