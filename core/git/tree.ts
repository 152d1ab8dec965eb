/**
 * A raw git tree object read entry by entry: `mode name\0` and the entry's id, 20 bytes under
 * SHA-1, 32 under SHA-256 (the tree's own id has the same length, which is how a caller knows).
 */

export interface TreeEntry {
  /** As git writes it: `100644`, `100755`, `120000` (a symlink), `40000` (a folder), `160000` (a submodule). */
  mode: string;
  name: string;
  oid: string;
}

/** The entries of tree `data` whose ids are `idBytes` long; a damaged tail is left out. */
export function treeEntries(data: Buffer, idBytes = 20): TreeEntry[] {
  return readEntries(data, idBytes).entries;
}

/** The entries of tree `data`, or null when it does not read to its end as entries. */
export function wholeTreeEntries(data: Buffer, idBytes = 20): TreeEntry[] | null {
  const read = readEntries(data, idBytes);
  return read.end === data.length ? read.entries : null;
}

function readEntries(data: Buffer, idBytes: number): { entries: TreeEntry[]; end: number } {
  const entries: TreeEntry[] = [];
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(32, at);
    const nul = space < 0 ? -1 : data.indexOf(0, space);
    if (nul < 0 || nul + 1 + idBytes > data.length) break;
    entries.push({ mode: data.toString('latin1', at, space), name: data.toString('utf8', space + 1, nul), oid: data.toString('hex', nul + 1, nul + 1 + idBytes) });
    at = nul + 1 + idBytes;
  }
  return { entries, end: at };
}

/** Whether an entry's mode names a file's content (a blob): not a folder, not a submodule. */
export function isFileMode(mode: string): boolean {
  return mode !== '40000' && mode !== '160000';
}
