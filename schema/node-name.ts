/** What a node (and a group folder) may be called; on its own, so that code that only checks a name loads no schema library. */
export const NODE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
