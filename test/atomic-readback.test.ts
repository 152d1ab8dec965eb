/**
 * The read-back of a file a batch just wrote: known without reading it again only while the file
 * at the path is the one the batch put there, unchanged since (same inode, size and modification
 * time as right after the write); a file replaced, rewritten or touched since is read again.
 */
import { lstatSync, mkdirSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WriteBatch } from '../agent/atomic.js';
import { readNode } from '../agent/resources/node.js';
import { newPass } from '../agent/resources/handler.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

/** A root with /srv, and a batch that wrote /srv/a.conf ("new\n") and committed it. */
function written() {
  const root = tempDir('mesh-readback-');
  mkdirSync(join(root, 'srv'));
  const pass = newPass();
  const path = join(root, 'srv/a.conf');
  writeFileSync(path, 'old\n');
  pass.writes.stage(path, Buffer.from('new\n'), 0o640, undefined);
  pass.writes.commit(pass.dirsToSync);
  return { root, pass, path, scope: { root, pass } };
}

const content = (scope: ReturnType<typeof written>['scope']) => Buffer.from(readNode(scope, '/srv/a.conf', true)!.content!, 'base64').toString();

describe('the read-back of a file a batch wrote', () => {
  it('knows the data of the file it put in place, as long as that file is unchanged', () => {
    const { path, pass, scope } = written();
    expect(pass.writes.written(path, lstatSync(path))).toEqual(Buffer.from('new\n'));
    expect(readNode(scope, '/srv/a.conf', true)).toMatchObject({ kind: 'file', mode: '0640', size: 4, content: Buffer.from('new\n').toString('base64') });
  });

  it('reads the file again when it was rewritten in place since (same size, another time)', () => {
    const { path, pass, scope } = written();
    writeFileSync(path, 'bad\n');
    utimesSync(path, new Date(1_000_000), new Date(1_000_000));
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(content(scope)).toBe('bad\n');
  });

  it('reads the file again when it grew or shrank since, whatever its time', () => {
    const { path, pass, scope } = written();
    const before = lstatSync(path);
    writeFileSync(path, 'longer\n');
    utimesSync(path, before.atime, before.mtime);
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(content(scope)).toBe('longer\n');
  });

  it('reads the file again when another file took its place, even with the same size and time', () => {
    const { root, path, pass, scope } = written();
    const before = lstatSync(path);
    const other = join(root, 'srv/other');
    writeFileSync(other, 'bad\n');
    utimesSync(other, before.atime, before.mtime);
    renameSync(other, path);
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(content(scope)).toBe('bad\n');
  });

  it('knows nothing of a path no batch of this pass wrote', () => {
    const { root, pass } = written();
    const path = join(root, 'srv/b.conf');
    writeFileSync(path, 'mine\n');
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(Buffer.from(readNode({ root, pass }, '/srv/b.conf', true)!.content!, 'base64').toString()).toBe('mine\n');
  });
});
