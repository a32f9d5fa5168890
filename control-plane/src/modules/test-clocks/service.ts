import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Static } from '@sinclair/typebox';
import { atTestTime, type Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { BillingScheduler } from '../purchases/scheduler';
import {
  claimAdvance,
  findTestClock,
  insertTestClock,
  listTestClocks,
  releaseAdvance,
  setFrozenTime,
  type TestClockRow,
} from './repository';
import type { TestClock } from './schemas';

const DAY_MS = 86_400_000;
/** The furthest one advance may move a clock, as Stripe bounds it: enough for a yearly renewal. */
const MAX_ADVANCE_MS = 366 * DAY_MS;
/** An advance still marked as running after this long lost its process and may be taken over. */
const STALE_ADVANCE_MS = 10 * 60_000;

const toTestClock = (row: TestClockRow): Static<typeof TestClock> => ({
  id: row.id,
  name: row.name,
  frozenTime: row.frozen_time.toISOString(),
  status: row.advancing_since === null ? 'ready' : 'advancing',
  createdAt: row.created_at.toISOString(),
});

const timeOf = (value: string | number): Date =>
  typeof value === 'number' ? new Date(value * 1000) : new Date(value);

/**
 * Sandbox test clocks, as Stripe has them. A customer created with `testClock` lives at the
 * clock's frozen time: its requests run at that time, and the scheduler's ordinary passes leave
 * its purchases alone. Advancing the clock walks it forward a day at a time up to the new time,
 * running at each step everything due then (renewals and their reminders, trials, dunning,
 * end-of-period usage billing), so a month passes in one call with the events in order.
 */
export class TestClockService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly scheduler: BillingScheduler,
  ) {}

  async create(auth: AuthContext, input: { frozenTime: string | number; name?: string | undefined }) {
    const row = await insertTestClock(this.pool, {
      id: newId(ID.testClock),
      provider_id: auth.providerId,
      name: input.name ?? null,
      frozen_time: timeOf(input.frozenTime),
      created_at: this.clock.now(),
    });
    return toTestClock(row);
  }

  async get(auth: AuthContext, id: string) {
    return toTestClock(await this.mustFind(auth, id));
  }

  async list(auth: AuthContext) {
    return { data: (await listTestClocks(this.pool, auth.providerId)).map(toTestClock) };
  }

  async advance(auth: AuthContext, id: string, frozenTime: string | number) {
    const current = await this.mustFind(auth, id);
    const target = timeOf(frozenTime);
    const problem = (message: string) =>
      new ValidationError([{ path: '/frozenTime', message, location: 'body' }]);
    if (target.getTime() <= current.frozen_time.getTime())
      throw problem(`must be later than the clock's frozen time (${current.frozen_time.toISOString()})`);
    if (target.getTime() - current.frozen_time.getTime() > MAX_ADVANCE_MS)
      throw problem('may be at most 366 days after the clock’s frozen time; advance in steps');
    const now = this.clock.now();
    const claimed = await claimAdvance(
      this.pool,
      current.id,
      now,
      new Date(now.getTime() - STALE_ADVANCE_MS),
    );
    if (claimed === undefined)
      throw new ConflictError(
        'test_clock_advancing',
        `Test clock ${id} is being advanced; try again when it is ready`,
      );
    try {
      let time = claimed.frozen_time;
      while (time.getTime() < target.getTime()) {
        time = new Date(Math.min(time.getTime() + DAY_MS, target.getTime()));
        await setFrozenTime(this.pool, current.id, time, false);
        await atTestTime(time, () => this.scheduler.runClock(current.id));
      }
      return toTestClock(await setFrozenTime(this.pool, current.id, target, true));
    } catch (error) {
      // The steps done stay done (each is a committed scheduler pass); the clock is free again.
      await releaseAdvance(this.pool, current.id);
      throw error;
    }
  }

  private async mustFind(auth: AuthContext, id: string): Promise<TestClockRow> {
    const row = await findTestClock(this.pool, auth, id);
    if (row === undefined) throw new NotFoundError('test_clock_not_found', `No test clock ${id}`);
    return row;
  }
}
