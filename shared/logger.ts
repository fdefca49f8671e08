import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/** JSON logs on stdout; `component` names the program (agent, init-container, coordinator). */
export function createLogger(component: string, level: string = 'info'): Logger {
  return pino({
    level,
    base: { component },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
