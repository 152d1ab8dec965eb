/**
 * Node identities for the simulated fleet, made the way `mesh-cli token issue` and
 * `mesh-host enrol` make them: a token key named in node.yaml, a node key, and the token
 * key's vouch for the node key. Also a realistic ~1 KB declaration per node.
 */
import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import { stringify } from 'yaml';
import { generateKeyPair, signSsh, sshPublicKey } from '../core/sign/sshsig.js';
import { VOUCH_NAMESPACE, vouchPayload } from '../schema/report.js';

export interface NodeKeys {
  node: string;
  privateKey: KeyObject;
  nodeKey: string;
  tokenKey: string;
  vouch: string;
  /** The node's git credential (user: the node), as its token would carry it. */
  secret: string;
}

/** A node enrolled at generation 1: token key, node key and the vouch that links them. */
export function nodeKeys(node: string): NodeKeys {
  const token = generateKeyPair();
  const own = generateKeyPair();
  const nodeKey = sshPublicKey(own.publicKey, `${node}@mesh`);
  const vouch = signSsh(vouchPayload(node, 1, nodeKey), token.privateKey, VOUCH_NAMESPACE);
  return { node, privateKey: own.privateKey, nodeKey, tokenKey: sshPublicKey(token.publicKey, `token-${node}`), vouch, secret: randomBytes(32).toString('base64url') };
}

/** nodes/<node>/node.yaml as `mesh-cli token issue` writes it: token key, expiry, and the sha256 of the node's credential. */
export function identityYaml(keys: NodeKeys, now: Date): string {
  const expires = new Date(now.getTime() + 86_400_000).toISOString();
  const credential = { sha256: createHash('sha256').update(keys.secret, 'utf8').digest('hex') };
  const identity = { node: keys.node, generation: 1, token: { publicKey: keys.tokenKey, issuedAt: now.toISOString(), expires }, credential };
  return `# written by mesh-cli token issue; do not edit by hand\n${stringify(identity)}`;
}

/** nodes/<node>/base.yaml: a directory and three files, about 1 KB; `change` varies one file's content. */
export function declarationYaml(node: string, change = 0): string {
  const settings = Array.from({ length: 12 }, (_, i) => `      setting_${i} = value-${i}-for-${node}`).join('\\n');
  return `resources:
  - type: directory
    path: /srv/app
    mode: "0750"
  - type: file
    path: /etc/motd
    content: "managed by mesh (${node})\\n"
    mode: "0644"
  - type: file
    path: /srv/app/app.ini
    content: "[app]\\n${settings}\\n"
    mode: "0640"
  - type: file
    path: /srv/app/revision
    content: "${change}\\n"
`;
}
