import { describe, expect, it } from 'vitest';
import { awaitTurn, SessionOrder, STREAM_GRACE_MS } from '../src/session-order';

describe("a session's order of requests to the origin", () => {
  it('lets each request go once the one before it of its session is written or ended', async () => {
    const order = new SessionOrder();
    const started: string[] = [];
    const get = order.enter('s1');
    const post = order.enter('s1');
    const other = order.enter('s2');
    const third = order.enter('s1');
    expect(order.enter('')).toBeUndefined();
    expect(get?.turn).toBeUndefined();
    expect(other?.turn).toBeUndefined();
    const going = [
      awaitTurn(post, 60_000).then(() => started.push('post')),
      awaitTurn(third, 60_000).then(() => started.push('third')),
      awaitTurn(other, 60_000).then(() => started.push('other')),
    ];
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Another session never waits; this one waits for its GET.
    expect(started).toEqual(['other']);
    get?.done();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(started).toEqual(['other', 'post']);
    post?.done();
    post?.done(); // twice: a refusal after a write changes nothing
    await Promise.all(going);
    expect(started).toEqual(['other', 'post', 'third']);
    third?.done();
    other?.done();
    expect(order.size).toBe(0);
  });

  it('holds a request back no longer than its bound when the one before it never ends', async () => {
    const order = new SessionOrder();
    order.enter('s');
    const next = order.enter('s');
    // Resolves (the test would time out otherwise) though the first request never ends.
    await expect(awaitTurn(next, 30)).resolves.toBeUndefined();
    expect(next?.pending).toBeDefined();
  });

  it("holds a just-initialized session's calls until its GET stream opens, at most the grace", async () => {
    const order = new SessionOrder();
    // Before any session initialized, and for other messages, calls never wait.
    const plain = order.enter('s1');
    expect(order.streamReady(plain)).toBeUndefined();
    order.written(plain as NonNullable<typeof plain>, { method: 'tools/list' });
    expect(order.streamReady(order.enter('s1'))).toBeUndefined();

    // s2 said it is initialized: its call waits until its GET has its head.
    const initialized = order.enter('s2');
    order.written(initialized as NonNullable<typeof initialized>, { method: 'notifications/initialized' });
    const call = order.enter('s2');
    const ready = order.streamReady(call);
    expect(ready).toBeInstanceOf(Promise);
    expect(order.streamReady(order.enter('s3'))).toBeUndefined();
    let opened = false;
    void ready?.then(() => {
      opened = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(opened).toBe(false);
    order.streamOpened(order.enter('s2'));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(opened).toBe(true);
    expect(order.streamReady(order.enter('s2'))).toBeUndefined();

    // s4 never opens a stream: its call goes once the grace is over.
    const quiet = order.enter('s4');
    order.written(quiet as NonNullable<typeof quiet>, { method: 'notifications/initialized' });
    const waiting = order.streamReady(order.enter('s4'));
    await new Promise((resolve) => setTimeout(resolve, STREAM_GRACE_MS + 20));
    await waiting;
    expect(order.streamReady(order.enter('s4'))).toBeUndefined();
  });
});
