import { Writable } from 'node:stream';
import pino from 'pino';

/** A pino logger writing into memory, and the lines it wrote so far. */
export function capturePino(options: pino.LoggerOptions): { logger: pino.Logger; lines: () => string } {
  let out = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      out += chunk.toString();
      done();
    },
  });
  return { logger: pino(options, stream), lines: () => out };
}

/** What a pino logger with the standard err serializer writes for `{ err }` (it follows `cause`). */
export function pinoErrLine(err: unknown): string {
  const { logger, lines } = capturePino({});
  logger.error({ err }, 'job failed');
  return lines();
}
