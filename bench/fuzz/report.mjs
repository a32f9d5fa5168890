// Summarises schemathesis NDJSON reports: requests and answers by status class per key, and
// every 5xx with its request. Writes api-fuzz.{md,json} into the given directory; exits 1 on
// any 5xx.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const [outDir, ...reports] = process.argv.slice(2);
const runs = [];
for (const file of reports) {
  const run = { key: basename(file, '.ndjson'), requests: 0, byStatus: {}, serverErrors: [] };
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue;
    const event = JSON.parse(line);
    const finished = event.ScenarioFinished;
    if (finished === undefined) continue;
    for (const interaction of Object.values(finished.recorder?.interactions ?? {})) {
      const status = interaction.response?.status_code;
      if (status === undefined) continue;
      run.requests++;
      const group = `${String(status)[0]}xx`;
      run.byStatus[group] = (run.byStatus[group] ?? 0) + 1;
      if (status >= 500)
        run.serverErrors.push(`${interaction.request.method} ${interaction.request.uri} -> ${status}`);
    }
  }
  runs.push(run);
}
const total = runs.reduce((sum, r) => sum + r.requests, 0);
const errors = runs.reduce((sum, r) => sum + r.serverErrors.length, 0);
const rows = runs.map(
  (r) =>
    `| ${r.key} | ${r.requests} | ${['2xx', '3xx', '4xx', '5xx'].map((g) => r.byStatus[g] ?? 0).join(' | ')} |`,
);
const md = [
  '# API schema fuzzing (schemathesis)',
  '',
  `Run with \`bash bench/api-fuzz.sh\` on ${new Date().toISOString().slice(0, 10)}: schemathesis generated`,
  'requests from `/openapi.json` (examples, coverage and fuzzing phases, NUL bytes allowed) and',
  'sent them to `npm start` on loopback with a sandbox key, a live key and no key. The check is',
  'that no answer is a 5xx.',
  '',
  '| key | requests | 2xx | 3xx | 4xx | 5xx |',
  '| --- | ---: | ---: | ---: | ---: | ---: |',
  ...rows,
  '',
  `Total: ${total} requests, ${errors} answered 5xx.`,
  ...(errors === 0
    ? []
    : ['', '## 5xx answers', '', ...runs.flatMap((r) => r.serverErrors.map((e) => `- ${r.key}: ${e}`))]),
  '',
].join('\n');
writeFileSync(join(outDir, 'api-fuzz.md'), md);
writeFileSync(
  join(outDir, 'api-fuzz.json'),
  `${JSON.stringify({ total, serverErrors: errors, runs }, null, 2)}\n`,
);
process.stdout.write(md);
process.exit(errors === 0 && total > 0 ? 0 : 1);
