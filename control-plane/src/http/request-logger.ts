import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Leveled = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/**
 * A request's logger that makes its pino child only when the request logs a line at an enabled
 * level. Every request used to build two children (its id, then its provider): 5% of a limit
 * check's CPU in a profile, for requests that at the usual levels log nothing. A line it does log
 * carries the same bindings as before. Children asking for their own level are made at once.
 */
export class RequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Leveled,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions = {},
  ) {}

  /** The logger Fastify makes for each request: lazy unless the route sets its own level. */
  static factory(
    logger: FastifyBaseLogger,
    bindings: Bindings,
    options: ChildLoggerOptions,
  ): FastifyBaseLogger {
    return options.level === undefined
      ? new RequestLogger(logger, bindings, options)
      : logger.child(bindings, options);
  }

  /** The pino child itself (through the parents', made with it, when they are lazy too). */
  private get logger(): FastifyBaseLogger {
    const parent = this.parent instanceof RequestLogger ? this.parent.logger : this.parent;
    this.made ??= parent.child(this.bindings, this.options);
    return this.made;
  }

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  isLevelEnabled(level: string): boolean {
    const source = (this.made ?? this.parent) as Leveled;
    return source.isLevelEnabled?.(level) ?? true;
  }

  private write(level: Level, args: unknown[]): void {
    if (!this.isLevelEnabled(level)) return;
    (this.logger[level] as (...line: unknown[]) => void)(...args);
  }

  // Methods on the prototype, not arrow fields: a request's logger is made for every request,
  // and fields would make seven closures each time for lines most requests never log.
  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return options?.level === undefined
      ? new RequestLogger(this, bindings, options)
      : this.logger.child(bindings, options);
  }
}
