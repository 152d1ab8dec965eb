/** Every path under a machine root with its kind, mode and content, leaving out `skip` (by default mesh-host's own state). */
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

const OWN_STATE = ['etc/mesh-host', 'var/lib/mesh-host'];

export function snapshot(root: string, rel = '', skip: string[] = OWN_STATE): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(root, rel)).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    if (skip.includes(path)) continue;
    const st = lstatSync(join(root, path));
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) {
      out[path + '/'] = mode;
      Object.assign(out, snapshot(root, path, skip));
    } else if (st.isSymbolicLink()) out[path] = `-> ${readlinkSync(join(root, path))}`;
    else out[path] = `${mode} ${readFileSync(join(root, path)).toString('base64')}`;
  }
  return out;
}
