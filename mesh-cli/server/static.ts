import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, resolve, sep } from 'node:path';

const TYPES: Record<string, string> = {
  '.deb': 'application/vnd.debian.binary-package',
  '.gz': 'application/gzip',
  '.xz': 'application/x-xz',
  '.gpg': 'application/pgp-signature',
  '.asc': 'text/plain; charset=utf-8',
};

/**
 * Serve one file of the package repository read-only. Directories are not listed, and a path
 * (or a symlink) that resolves outside `root` is answered as not found.
 */
export async function servePackageFile(root: string, file: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const found = await resolveInside(root, file);
  if (found === null) {
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`not found: /packages/${file}\n`);
    return;
  }
  res.writeHead(200, {
    'Content-Type': TYPES[extname(found.path)] ?? 'application/octet-stream',
    'Content-Length': String(found.size),
    'Last-Modified': found.mtime.toUTCString(),
  });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const body = createReadStream(found.path);
  body.on('error', () => res.destroy());
  body.pipe(res);
}

async function resolveInside(root: string, file: string): Promise<{ path: string; size: number; mtime: Date } | null> {
  try {
    const realRoot = await realpath(root);
    const path = await realpath(resolve(realRoot, file));
    if (!path.startsWith(realRoot + sep)) return null;
    const info = await stat(path);
    return info.isFile() ? { path, size: info.size, mtime: info.mtime } : null;
  } catch {
    return null;
  }
}
