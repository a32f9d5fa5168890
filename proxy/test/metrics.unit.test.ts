import { describe, expect, it } from 'vitest';
import { Counter } from '../src/metrics';

describe('a labelled counter', () => {
  it('counts one series whether a label is given as an object or by name and value', () => {
    const requests = new Counter('requests_total', 'Requests');
    requests.inc({ code: '200' });
    requests.incLabel('code', 200);
    requests.incLabel('code', 200, 2);
    requests.incLabel('code', 502);
    requests.incLabel('outcome', 'say "hi"');
    expect(requests.render().split('\n')).toEqual([
      '# HELP requests_total Requests',
      '# TYPE requests_total counter',
      'requests_total{code="200"} 4',
      'requests_total{code="502"} 1',
      'requests_total{outcome="say _hi_"} 1',
      '',
    ]);
  });
});
