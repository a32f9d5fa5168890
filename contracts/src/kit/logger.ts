import { type Logger, pino } from 'pino';

export type { Logger };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Secrets must never reach a log line, whatever object carries them. */
const REDACT = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  '*.apiKey',
  '*.secretKey',
  '*.password',
  '*.sandboxKey',
  '*.liveKey',
];

export function createLogger(options: { level: LogLevel; name: string }): Logger {
  const pretty = process.stdout.isTTY === true;
  return pino({
    name: options.name,
    level: options.level,
    redact: { paths: REDACT, censor: '[redacted]' },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true } } } : {}),
  });
}
