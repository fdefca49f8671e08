import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * JSON logs on stdout; `component` names the program (agent, init-container, coordinator).
 *
 * Writes are synchronous: pino 10's default stdout destination is asynchronous, and with
 * `process.exit` right after a log call it reorders lines (the first line of a run came out
 * last) and can lose the final one, which is exactly the line that explains an exit code.
 */
export function createLogger(component: string, level: string = 'info'): Logger {
  return pino(
    {
      level,
      base: { component },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pino.destination({ dest: 1, sync: true }),
  );
}
