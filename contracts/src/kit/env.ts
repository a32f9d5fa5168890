/**
 * Typed environment parsing shared by every service's config.ts. Each reader collects problems
 * instead of throwing on the first one, so a misconfigured process reports everything at once.
 */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

export interface EnvReader {
  string(name: string, fallback: string): string;
  optionalString(name: string): string | undefined;
  int(name: string, fallback: number, range?: { min?: number; max?: number }): number;
  /** An integer in range when the variable is set; undefined when unset or empty. */
  optionalInt(name: string, range?: { min?: number; max?: number }): number | undefined;
  bool(name: string, fallback: boolean): boolean;
  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T;
  url(name: string, protocols: readonly string[]): string | undefined;
  list(name: string): string[];
  /** Records a cross-field problem found by the caller. */
  problem(message: string): void;
  /** Throws ConfigError listing every problem, or returns the frozen config. */
  done<T extends object>(config: T): Readonly<T>;
}

export function readEnv(env: Env): EnvReader {
  const problems: string[] = [];
  const raw = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  const int: EnvReader['int'] = (name, fallback, range = {}) => {
    const value = raw(name);
    if (value === undefined) return fallback;
    const parsed = Number(value);
    const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = range;
    if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(parsed)) {
      problems.push(`${name}: expected an integer, got "${value}"`);
      return fallback;
    }
    if (parsed < min || parsed > max) {
      problems.push(`${name}: must be between ${min} and ${max}, got ${parsed}`);
      return fallback;
    }
    return parsed;
  };
  return {
    string: (name, fallback) => raw(name) ?? fallback,
    optionalString: (name) => raw(name),
    int,
    optionalInt(name, range) {
      return raw(name) === undefined ? undefined : int(name, 0, range);
    },
    bool(name, fallback) {
      const value = raw(name)?.toLowerCase();
      if (value === undefined) return fallback;
      if (['1', 'true', 'yes', 'on'].includes(value)) return true;
      if (['0', 'false', 'no', 'off'].includes(value)) return false;
      problems.push(`${name}: expected true or false, got "${value}"`);
      return fallback;
    },
    oneOf(name, allowed, fallback) {
      const value = raw(name);
      if (value === undefined) return fallback;
      if ((allowed as readonly string[]).includes(value)) return value as (typeof allowed)[number];
      problems.push(`${name}: expected one of ${allowed.join(', ')}, got "${value}"`);
      return fallback;
    },
    url(name, protocols) {
      const value = raw(name);
      if (value === undefined) return undefined;
      try {
        const url = new URL(value);
        if (!protocols.includes(url.protocol.replace(/:$/, ''))) {
          problems.push(`${name}: expected a ${protocols.join(' or ')} URL, got "${url.protocol}"`);
        }
        return value;
      } catch {
        problems.push(`${name}: not a valid URL: "${value}"`);
        return undefined;
      }
    },
    list(name) {
      const value = raw(name);
      return value === undefined
        ? []
        : value
            .split(',')
            .map((part) => part.trim())
            .filter(Boolean);
    },
    problem(message) {
      problems.push(message);
    },
    done(config) {
      if (problems.length > 0) throw new ConfigError(problems);
      return Object.freeze(config);
    },
  };
}
