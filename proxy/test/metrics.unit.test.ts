import { Counter } from '@mcp-meter/contracts/metrics';
import { describe, expect, it } from 'vitest';
import { labelWorker, mergePages } from '../src/metrics-page';

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

describe("proxy workers' pages as one", () => {
  const page = (worker: number, calls: number) =>
    labelWorker(
      [
        new Counter('calls_total', 'Calls')
          .render()
          .replace('calls_total 0', `calls_total{outcome="ok"} ${calls}`),
        '# HELP up_seconds Up',
        '# TYPE up_seconds histogram',
        'up_seconds_bucket{le="0.001"} 1',
        'up_seconds_bucket{le="+Inf"} 2',
        'up_seconds_sum 0.5',
        'up_seconds_count 2',
        '# HELP worker This worker',
        '# TYPE worker gauge',
        `worker ${worker}`,
        '',
      ].join('\n'),
      worker,
    );

  it("labels every sample with its worker, and keeps each family's lines together", () => {
    expect(mergePages([page(0, 3), page(1, 5)]).split('\n')).toEqual([
      '# HELP calls_total Calls',
      '# TYPE calls_total counter',
      'calls_total{worker="0",outcome="ok"} 3',
      'calls_total{worker="1",outcome="ok"} 5',
      '# HELP up_seconds Up',
      '# TYPE up_seconds histogram',
      'up_seconds_bucket{worker="0",le="0.001"} 1',
      'up_seconds_bucket{worker="0",le="+Inf"} 2',
      'up_seconds_sum{worker="0"} 0.5',
      'up_seconds_count{worker="0"} 2',
      'up_seconds_bucket{worker="1",le="0.001"} 1',
      'up_seconds_bucket{worker="1",le="+Inf"} 2',
      'up_seconds_sum{worker="1"} 0.5',
      'up_seconds_count{worker="1"} 2',
      '# HELP worker This worker',
      '# TYPE worker gauge',
      'worker{worker="0"} 0',
      'worker{worker="1"} 1',
      '',
    ]);
  });

  it('is one page as it was when there is one, blank lines left out', () => {
    expect(mergePages([page(2, 7)])).toBe(page(2, 7).replace(/\n\n+/g, '\n'));
  });
});
