declare const __MESH_VERSION__: string | undefined;

/** The host's version: stamped into the bundle at build time; `0.0.0-dev` when run from source. */
export const HOST_VERSION: string = typeof __MESH_VERSION__ === 'string' ? __MESH_VERSION__ : '0.0.0-dev';
