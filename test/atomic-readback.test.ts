/**
 * The read-back of a file a batch just wrote: known without reading it again only while the file
 * at the path is the one the batch put there, unchanged since (same inode, size and modification
 * time as right after the write); a file replaced, rewritten or touched since is read again.
 */
import { lstatSync, mkdirSync, readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fsyncTogether, SYNCFS_MAX_FOREIGN, syncfsFits } from '../agent/atomic.js';
import { readNode } from '../agent/resources/node.js';
import { newPass } from '../agent/resources/handler.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

/** A root with /srv, and a batch that wrote /srv/a.conf ("new\n") and committed it. */
async function written() {
  const root = tempDir('mesh-readback-');
  mkdirSync(join(root, 'srv'));
  const pass = newPass();
  const path = join(root, 'srv/a.conf');
  writeFileSync(path, 'old\n');
  pass.writes.stage(path, Buffer.from('new\n'), 0o640, undefined);
  await pass.writes.commit(pass.dirsToSync);
  return { root, pass, path, scope: { root, pass } };
}

const content = (scope: Awaited<ReturnType<typeof written>>['scope']) => Buffer.from(readNode(scope, '/srv/a.conf', true)!.content!, 'base64').toString();

describe('the read-back of a file a batch wrote', () => {
  it('knows the data of the file it put in place, as long as that file is unchanged', async () => {
    const { path, pass, scope } = await written();
    expect(pass.writes.written(path, lstatSync(path))).toEqual(Buffer.from('new\n'));
    expect(readNode(scope, '/srv/a.conf', true)).toMatchObject({ kind: 'file', mode: '0640', size: 4, content: Buffer.from('new\n').toString('base64') });
  });

  it('reads the file again when it was rewritten in place since (same size, another time)', async () => {
    const { path, pass, scope } = await written();
    writeFileSync(path, 'bad\n');
    utimesSync(path, new Date(1_000_000), new Date(1_000_000));
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(content(scope)).toBe('bad\n');
  });

  it('reads the file again when it grew or shrank since, whatever its time', async () => {
    const { path, pass, scope } = await written();
    const before = lstatSync(path);
    writeFileSync(path, 'longer\n');
    utimesSync(path, before.atime, before.mtime);
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(content(scope)).toBe('longer\n');
  });

  it('reads the file again when another file took its place, even with the same size and time', async () => {
    const { root, path, pass, scope } = await written();
    const before = lstatSync(path);
    const other = join(root, 'srv/other');
    writeFileSync(other, 'bad\n');
    utimesSync(other, before.atime, before.mtime);
    renameSync(other, path);
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(content(scope)).toBe('bad\n');
  });

  it('knows nothing of a path no batch of this pass wrote', async () => {
    const { root, pass } = await written();
    const path = join(root, 'srv/b.conf');
    writeFileSync(path, 'mine\n');
    expect(pass.writes.written(path, lstatSync(path))).toBeUndefined();
    expect(Buffer.from(readNode({ root, pass }, '/srv/b.conf', true)!.content!, 'base64').toString()).toBe('mine\n');
  });
});

describe('how a large batch makes its data durable', () => {
  const meminfo = (dirtyKb: number, writebackKb = 0) => `MemTotal:       24683748 kB\nDirty:          ${String(dirtyKb).padStart(8)} kB\nWriteback:      ${String(writebackKb).padStart(8)} kB\n`;

  it('uses syncfs only while little of other programs is pending: syncfs would write and wait for all of it', () => {
    expect(syncfsFits(meminfo(8_676), 0)).toBe(true);
    expect(syncfsFits(meminfo(16 * 1024), 0)).toBe(true);
    expect(syncfsFits(meminfo(16 * 1024 + 1), 0)).toBe(false);
    expect(syncfsFits(meminfo(10 * 1024, 7 * 1024), 0)).toBe(false);
    // The batch's own data is pending too, and does not count against it.
    expect(syncfsFits(meminfo(40 * 1024), 30 * 1024 * 1024)).toBe(true);
    expect(SYNCFS_MAX_FOREIGN).toBe(16 * 1024 * 1024);
    // /proc/meminfo unreadable or without the fields: the files are fsynced, which waits for nothing else.
    expect(syncfsFits(null, 0)).toBe(false);
    expect(syncfsFits('MemTotal: 1 kB\n', 0)).toBe(false);
  });

  it('fsyncs every file, a few at a time, and fails when one cannot be opened', async () => {
    const dir = tempDir('mesh-fsync-');
    const paths = Array.from({ length: 40 }, (_, i) => join(dir, `f${i}`));
    for (const p of paths) writeFileSync(p, `${p}\n`);
    await expect(fsyncTogether(paths)).resolves.toBeUndefined();
    await expect(fsyncTogether([...paths, join(dir, 'missing')])).rejects.toThrow(/ENOENT/);
    await expect(fsyncTogether([])).resolves.toBeUndefined();
  });

  it('puts every file of a large batch in place with its data, whichever way it synced', async () => {
    const root = tempDir('mesh-batch-');
    const pass = newPass();
    const paths = Array.from({ length: 30 }, (_, i) => join(root, `f${i}.conf`));
    for (const p of paths) pass.writes.stage(p, Buffer.from(`${p}\n`), 0o644, undefined);
    await pass.writes.commit(pass.dirsToSync);
    for (const p of paths) expect(readFileSync(p, 'utf8')).toBe(`${p}\n`);
    expect([...pass.dirsToSync]).toEqual([root]);
  });
});
