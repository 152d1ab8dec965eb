/** Logs: JSON lines (pino) on stderr, so that stdout carries only a command's result. */
import pino, { type Logger } from 'pino';

export type { Logger };

/** The process logger; MESH_LOG_LEVEL sets the level (default info). */
export function createLogger(name: string): Logger {
  return pino({ name, level: process.env.MESH_LOG_LEVEL ?? 'info', base: undefined }, pino.destination({ fd: 2, sync: true }));
}
