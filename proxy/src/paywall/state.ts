import { createHash, hkdfSync } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';

/**
 * The `requestState` of a modern paywall (MCP 2026-07-28 `input_required`): the client echoes
 * it on the retry it makes after checkout, and the proxy then checks the limit again and sends
 * the original call on. It is attacker-controlled input, so it is a signed JWT (jose, HS256) that
 * binds the customer, the MCP server, the tool, a digest of the arguments and a short expiry;
 * any proxy of a deployment can verify it (the key derives from SECRET_KEY). Keys carry an id,
 * and states signed with a previous SECRET_KEY still verify until they expire when that key is
 * given as `previous`.
 */
export const STATE_PREFIX = 'mcpm.paywall.';
const INFO = 'mcp-meter paywall requestState v1';
export const STATE_TTL_SECONDS = 30 * 60;

export interface StateBinding {
  customer: string;
  server: string;
  tool: string;
  arguments: unknown;
}

export type StateCheck = 'ok' | 'invalid' | 'expired' | 'mismatch';

/** How a refused state is described to the client. */
export const STATE_PROBLEMS: Record<Exclude<StateCheck, 'ok'>, string> = {
  invalid: 'is not valid',
  expired: 'has expired',
  mismatch: 'belongs to another customer or call',
};

interface Key {
  id: string;
  secret: Uint8Array;
}

function keyOf(secretKey: Buffer): Key {
  const secret = new Uint8Array(hkdfSync('sha256', secretKey, Buffer.alloc(0), INFO, 32));
  return { id: createHash('sha256').update(secret).digest('hex').slice(0, 12), secret };
}

type Piece = { text: string } | { value: unknown };

/**
 * JSON with object keys sorted, so equal arguments digest alike whatever order they came in.
 * Iterative, with its own stack: arguments come from the client, and their depth is theirs
 * (the proxy refuses bodies deeper than 64 levels, but nothing here relies on it).
 */
export function canonical(root: unknown): string {
  let out = '';
  const work: Piece[] = [{ value: root }];
  for (let piece = work.pop(); piece !== undefined; piece = work.pop()) {
    if ('text' in piece) {
      out += piece.text;
      continue;
    }
    const value = piece.value;
    if (Array.isArray(value)) {
      work.push({ text: ']' });
      for (let i = value.length - 1; i >= 0; i--) {
        work.push({ value: value[i] });
        if (i > 0) work.push({ text: ',' });
      }
      out += '[';
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      work.push({ text: '}' });
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, member] = entries[i] as [string, unknown];
        work.push({ value: member });
        work.push({ text: `${i > 0 ? ',' : ''}${JSON.stringify(key)}:` });
      }
      out += '{';
    } else out += JSON.stringify(value ?? null);
  }
  return out;
}

/** A digest of a call's arguments, equal for equal arguments whatever their keys' order. */
export const argumentsDigest = (args: unknown) =>
  createHash('sha256').update(canonical(args)).digest('base64url');
const digestOf = argumentsDigest;

export class PaywallStates {
  private readonly current: Key;
  private readonly keys = new Map<string, Key>();

  constructor(secretKey: Buffer, previous: Buffer[] = []) {
    this.current = keyOf(secretKey);
    for (const key of [this.current, ...previous.map(keyOf)]) this.keys.set(key.id, key);
  }

  /** A state for this paywalled call, valid for STATE_TTL_SECONDS. */
  async mint(binding: StateBinding): Promise<string> {
    const jwt = await new SignJWT({
      srv: binding.server,
      tool: binding.tool,
      args: digestOf(binding.arguments),
    })
      .setProtectedHeader({ alg: 'HS256', kid: this.current.id })
      .setSubject(binding.customer)
      .setIssuedAt()
      .setExpirationTime(`${STATE_TTL_SECONDS}s`)
      .sign(this.current.secret);
    return `${STATE_PREFIX}${jwt}`;
  }

  /** Whether a `requestState` is one of the proxy's (any other is the origin's, passed through). */
  static isOurs(state: unknown): state is string {
    return typeof state === 'string' && state.startsWith(STATE_PREFIX);
  }

  /** Checks a state the client echoed against the call it came back with. */
  async check(state: string, binding: StateBinding): Promise<StateCheck> {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(
        state.slice(STATE_PREFIX.length),
        (header) => {
          const key = header.kid === undefined ? undefined : this.keys.get(header.kid);
          if (key === undefined) throw new errors.JWSSignatureVerificationFailed();
          return key.secret;
        },
        { algorithms: ['HS256'] },
      ));
    } catch (error) {
      return error instanceof errors.JWTExpired ? 'expired' : 'invalid';
    }
    const same =
      payload.sub === binding.customer &&
      payload.srv === binding.server &&
      payload.tool === binding.tool &&
      payload.args === digestOf(binding.arguments);
    return same ? 'ok' : 'mismatch';
  }
}
