import { ConfigError, readEnv } from '@mcp-meter/contracts/kit';
import { readBusConfig } from '@mcp-meter/contracts/usage';
import { describe, expect, it } from 'vitest';

describe('configuration', () => {
  it('applies defaults when nothing is set', () => {
    const env = readEnv({});
    const bus = env.done(readBusConfig(env));
    expect(bus).toMatchObject({
      kafkaBrokers: [],
      namespace: 'mcpmeter',
      batchSize: 20_000,
      flushIntervalMs: 1000,
      fetchMinBytes: 524288,
      fetchMaxWaitMs: 250,
    });
    expect(Object.isFrozen(bus)).toBe(true);
  });

  it('gives the in-process bus a larger batch than a Kafka consumer', () => {
    const kafka = readEnv({ KAFKA_BROKERS: 'h1:9092' });
    expect(kafka.done(readBusConfig(kafka)).batchSize).toBe(5000);
    const set = readEnv({ INGEST_BATCH_SIZE: '300' });
    expect(set.done(readBusConfig(set)).batchSize).toBe(300);
  });

  it('names every bad variable and what is wrong with it, all at once', () => {
    const env = readEnv({
      INGEST_BATCH_SIZE: 'lots',
      INGEST_FLUSH_INTERVAL_MS: '0',
      BUS_NAMESPACE: 'a..b',
      KAFKA_BROKERS: 'h1:9092, h2:9092',
    });
    const config = readBusConfig(env);
    expect(config.kafkaBrokers).toEqual(['h1:9092', 'h2:9092']);
    try {
      env.done(config);
      expect.unreachable('done() should throw');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const problems = (error as ConfigError).problems;
      expect(problems).toHaveLength(3);
      expect(problems[0]).toMatch(/^BUS_NAMESPACE: /);
      expect(problems[1]).toBe('INGEST_BATCH_SIZE: expected an integer, got "lots"');
      expect(problems[2]).toBe('INGEST_FLUSH_INTERVAL_MS: must be between 10 and 60000, got 0');
    }
  });

  it('reads an optional integer: absent when unset or blank, checked when set', () => {
    const env = readEnv({
      PORT_SET: ' 9464 ',
      PORT_ZERO: '0',
      PORT_BLANK: '  ',
      PORT_BAD: '94a',
      PORT_HIGH: '70000',
    });
    const range = { min: 0, max: 65535 };
    expect(env.optionalInt('PORT_SET', range)).toBe(9464);
    expect(env.optionalInt('PORT_ZERO', range)).toBe(0);
    expect(env.optionalInt('PORT_UNSET', range)).toBeUndefined();
    expect(env.optionalInt('PORT_BLANK', range)).toBeUndefined();
    env.optionalInt('PORT_BAD', range);
    env.optionalInt('PORT_HIGH', range);
    expect(() => env.done({})).toThrow(ConfigError);
    try {
      env.done({});
    } catch (error) {
      expect((error as ConfigError).problems).toEqual([
        'PORT_BAD: expected an integer, got "94a"',
        'PORT_HIGH: must be between 0 and 65535, got 70000',
      ]);
    }
  });

  it('checks URLs, booleans and enumerations', () => {
    const env = readEnv({ U: 'ftp://x', B: 'maybe', E: 'loud' });
    env.url('U', ['http']);
    env.bool('B', true);
    env.oneOf('E', ['info', 'warn'], 'info');
    expect(() => env.done({})).toThrow(
      /U: expected a http URL[\s\S]*B: expected true or false[\s\S]*E: expected one of info, warn/,
    );
  });
});
