/** Logs: JSON lines (pino) on stderr, so that stdout carries only a command's result. */
import pino, { type Logger } from 'pino';

export type { Logger };

/** The process logger at `level` (main.ts reads MESH_LOG_LEVEL; default info). */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({ name, level, base: undefined }, pino.destination({ fd: 2, sync: true }));
}
