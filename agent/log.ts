/**
 * Logs: pino on stderr, so that stdout carries only a command's result. JSON lines when stderr is
 * not a terminal (systemd's journal, a pipe, a test), the same records drawn for a person when it
 * is (pino-pretty, in-process: no worker thread). What each level carries is in the README.
 */
import pino, { type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';

export type { Logger };

/** The process logger at `level` (main.ts: --log-level, else MESH_LOG_LEVEL, else info); `forPerson` draws lines for a terminal. */
export function createLogger(name: string, level = 'info', forPerson = false): Logger {
  // pino-pretty only for a person: a plain `require`, which esbuild resolves into the bundle (kept packed there, scripts/build.mjs).
  const pretty = forPerson ? (require('pino-pretty') as typeof PinoPretty) : undefined;
  const out = pretty ? pretty({ destination: 2, sync: true, translateTime: 'SYS:HH:MM:ss', ignore: 'name' }) : pino.destination({ fd: 2, sync: true });
  return pino({ name, level, base: undefined }, out);
}
