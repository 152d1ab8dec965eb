/** One handler per resource type. Types without a handler yet fail with a clear error, never silently. */
import type { Resource, ResourceType } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { commandHandler } from './command.js';
import { directoryHandler } from './directory.js';
import { fileHandler } from './file.js';
import { groupHandler } from './group.js';
import type { Handler } from './handler.js';
import { serviceHandler } from './service.js';
import { symlinkHandler } from './symlink.js';
import { userHandler } from './user.js';
import { packageHandler } from './package.js';

const handlers: Partial<Record<ResourceType, Handler<never>>> = {
  file: fileHandler,
  directory: directoryHandler,
  symlink: symlinkHandler,
  user: userHandler,
  group: groupHandler,
  service: serviceHandler,
  package: packageHandler,
  command: commandHandler,
};

/** The handler for `r`'s type. */
export function handlerFor(r: Resource): Handler {
  const handler = handlers[r.type];
  if (!handler) throw new MeshError('E_UNSUPPORTED', `resource type '${r.type}' is not supported by this host version yet`);
  return handler as unknown as Handler;
}

/** The handler for an owned record's type (for removal). */
export function handlerForType(type: string): Handler {
  return handlerFor({ type } as Resource);
}
