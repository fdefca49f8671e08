import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

export interface CapturedLog {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** A pino logger whose JSON lines are kept in memory, parsed, for assertions on what was logged. */
export function captureLogger(): { logger: Logger; lines: CapturedLog[] } {
  const lines: CapturedLog[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as CapturedLog);
      done();
    },
  });
  const logger = pino({ level: 'debug', formatters: { level: (label) => ({ level: label }) } }, sink);
  return { logger, lines };
}
