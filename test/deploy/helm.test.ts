import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

/**
 * The Helm chart (deploy/helm/mcp-meter), checked as CI can without a cluster: `helm lint
 * --strict`, `helm template`, and every rendered manifest validated strictly (no unknown field)
 * against Kubernetes 1.33's schemas by kubernetes-validate, which carries them offline. helm and
 * kubernetes-validate come from test/helm/install.sh (Go module proxy, PyPI).
 */
const root = join(import.meta.dirname, '..', '..');
const chart = join(root, 'deploy', 'helm', 'mcp-meter');
const values = join(import.meta.dirname, 'fixtures', 'helm-values.yaml');
const KUBERNETES = '1.33.0';
const run = promisify(execFile);

// biome-ignore lint/suspicious/noExplicitAny: manifests are read field by field
type Manifest = any;

let helm: string;
let validator: string;
const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-helm-'));

beforeAll(async () => {
  const { stdout } = await run('bash', [join(root, 'test', 'helm', 'install.sh')], { timeout: 900_000 });
  [helm = '', validator = ''] = stdout.trim().split('\n');
}, 900_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `helm template` with the values files and `--set`s given; its manifests, and where they are. */
async function render(args: string[]): Promise<{ file: string; manifests: Manifest[] }> {
  const { stdout } = await run(helm, ['template', 'mm', chart, '--kube-version', KUBERNETES, ...args], {
    maxBuffer: 16 * 1024 * 1024,
  });
  const file = join(dir, `rendered-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, stdout);
  return {
    file,
    manifests: parseAllDocuments(stdout)
      .map((d) => d.toJS())
      .filter(Boolean),
  };
}

/** kubernetes-validate --strict over a rendered file: its exit code and output. */
async function validate(file: string) {
  return run(validator, ['--strict', '--quiet', '-k', KUBERNETES, file]).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );
}

describe('the Helm chart', () => {
  it('passes helm lint --strict', async () => {
    const { stdout } = await run(helm, [
      'lint',
      chart,
      '--strict',
      '-f',
      values,
      '--kube-version',
      KUBERNETES,
    ]);
    expect(stdout).toContain('0 chart(s) failed');
  });

  it('renders every object a deployment needs, each valid against the Kubernetes schemas', async () => {
    const { file, manifests } = await render(['-f', values]);
    const kinds = manifests.map((m) => `${m.kind}/${m.metadata.name}`).sort();
    expect(kinds).toEqual([
      'Deployment/mm-mcp-meter-control-plane',
      'Deployment/mm-mcp-meter-ingest',
      'Deployment/mm-mcp-meter-proxy',
      'HorizontalPodAutoscaler/mm-mcp-meter-proxy',
      'Ingress/mm-mcp-meter',
      'Job/mm-mcp-meter-migrate',
      'PodDisruptionBudget/mm-mcp-meter-control-plane',
      'PodDisruptionBudget/mm-mcp-meter-ingest',
      'PodDisruptionBudget/mm-mcp-meter-proxy',
      'Secret/mm-mcp-meter-secrets',
      'Service/mm-mcp-meter-control-plane',
      'Service/mm-mcp-meter-proxy',
    ]);
    const checked = await validate(file);
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);

    const byName = (kind: string, name: string) =>
      manifests.find((m) => m.kind === kind && m.metadata.name === name);
    const container = (name: string) =>
      byName('Deployment', name)?.spec.template.spec.containers[0] as Manifest;
    // Each role runs as SERVICES says, probed on /healthz where it serves HTTP.
    for (const [role, port] of [
      ['control-plane', 8080],
      ['proxy', 8081],
    ] as const) {
      const c = container(`mm-mcp-meter-${role}`);
      expect(c.env.find((e: Manifest) => e.name === 'SERVICES').value).toBe(role);
      expect(c.ports[0].containerPort).toBe(port);
      expect(c.readinessProbe.httpGet.path).toBe('/healthz');
    }
    const ingest = container('mm-mcp-meter-ingest');
    expect(ingest.livenessProbe.exec.command).toEqual(['node', 'deploy/healthcheck.mjs']);
    // Ingest alone answers /metrics (and the probe's /healthz) on its metrics port.
    expect(ingest.ports).toEqual([{ name: 'metrics', containerPort: 9464, protocol: 'TCP' }]);
    expect(ingest.env.find((e: Manifest) => e.name === 'INGEST_METRICS_PORT').value).toBe('9464');
    expect(ingest.env.find((e: Manifest) => e.name === 'METRICS_TOKEN').valueFrom.secretKeyRef).toMatchObject(
      {
        key: 'METRICS_TOKEN',
        optional: true,
      },
    );
    // The proxy drains on SIGTERM: Kubernetes waits for it; the HPA owns its replica count.
    const proxy = byName('Deployment', 'mm-mcp-meter-proxy');
    expect(proxy.spec.template.spec.terminationGracePeriodSeconds).toBe(30);
    expect(container('mm-mcp-meter-proxy').lifecycle.preStop.exec.command).toEqual(['sleep', '5']);
    expect(proxy.spec.replicas).toBeUndefined();
    // The migration Job runs the admin CLI's `db migrate`, which the CLI knows.
    const job = byName('Job', 'mm-mcp-meter-migrate');
    expect(job.spec.template.spec.containers[0].command).toEqual([
      'node',
      'deploy/admin.mjs',
      'db',
      'migrate',
    ]);
    expect(readFileSync(join(root, 'control-plane', 'src', 'admin', 'cli.ts'), 'utf8')).toContain(
      "'db migrate'",
    );
    // *.<proxyBaseDomain> reaches the proxy.
    const hosts = byName('Ingress', 'mm-mcp-meter').spec.rules.map((r: Manifest) => r.host);
    expect(hosts).toEqual(['api.example.com', 'mcp.example.com', '*.mcp.example.com']);
    // Every setting given to the services is one they read (docs/configuration.md).
    const configured = readFileSync(join(root, 'docs', 'configuration.md'), 'utf8');
    for (const env of container('mm-mcp-meter-control-plane').env as Array<{ name: string }>)
      expect(configured, env.name).toContain(`\`${env.name}\``);
    // Not root, and nothing written outside its volumes.
    expect(proxy.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
    expect(container('mm-mcp-meter-proxy').securityContext.readOnlyRootFilesystem).toBe(true);
  });

  it('takes an existing Secret and fixed proxy replicas instead, still valid', async () => {
    const { file, manifests } = await render([
      '--set',
      'existingSecret=mcp-meter-prod',
      '--set',
      'proxy.autoscaling.enabled=false',
    ]);
    expect(manifests.some((m) => m.kind === 'Secret')).toBe(false);
    expect(manifests.some((m) => m.kind === 'HorizontalPodAutoscaler')).toBe(false);
    expect(
      manifests.find((m) => m.metadata.name === 'mm-mcp-meter-proxy' && m.kind === 'Deployment').spec
        .replicas,
    ).toBe(2);
    const secretRefs = manifests
      .filter((m) => m.kind === 'Deployment')
      .flatMap((m) => m.spec.template.spec.containers[0].env)
      .filter((e: Manifest) => e.valueFrom !== undefined)
      .map((e: Manifest) => e.valueFrom.secretKeyRef.name);
    expect(new Set(secretRefs)).toEqual(new Set(['mcp-meter-prod']));
    expect((await validate(file)).code).toBe(0);
  });

  it("scrapes every service's metrics page with the Prometheus Operator's PodMonitors when asked", async () => {
    const scraped = async (args: string[]) => {
      const { file, manifests } = await render(['-f', values, '--set', 'podMonitor.enabled=true', ...args]);
      return { file, manifests, monitors: manifests.filter((m) => m.kind === 'PodMonitor') };
    };
    const { file, manifests, monitors } = await scraped([
      '--set',
      'metricsToken=scrape-me',
      '--set',
      'podMonitor.labels.release=prometheus',
    ]);
    expect(monitors.map((m) => m.metadata.name).sort()).toEqual([
      'mm-mcp-meter-control-plane',
      'mm-mcp-meter-ingest',
      'mm-mcp-meter-proxy',
    ]);
    const secret = manifests.find((m) => m.kind === 'Secret');
    expect(secret.stringData.METRICS_TOKEN).toBe('scrape-me');
    for (const monitor of monitors) {
      expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
      expect(monitor.metadata.labels.release).toBe('prometheus');
      // It selects exactly one Deployment's pods, by labels they carry, on a port they name.
      const selected = manifests.filter(
        (m) =>
          m.kind === 'Deployment' &&
          Object.entries(monitor.spec.selector.matchLabels).every(
            ([key, value]) => m.spec.template.metadata.labels[key] === value,
          ),
      );
      expect(selected.map((m) => m.metadata.name)).toEqual([monitor.metadata.name]);
      const [endpoint] = monitor.spec.podMetricsEndpoints;
      const ports = selected[0].spec.template.spec.containers[0].ports.map((p: Manifest) => p.name);
      expect(ports).toContain(endpoint.port);
      expect(endpoint.path).toBe('/metrics');
      expect(endpoint.authorization).toEqual({
        type: 'Bearer',
        credentials: { name: secret.metadata.name, key: 'METRICS_TOKEN' },
      });
      // The job label is the service's, as the rules' alerts keep it.
      expect(selected[0].spec.template.metadata.labels[monitor.spec.jobLabel]).toBe(
        monitor.metadata.labels['app.kubernetes.io/component'],
      );
    }
    // kubernetes-validate knows no custom resources: everything else rendered stays valid.
    const rest = join(dir, 'without-monitors.yaml');
    writeFileSync(
      rest,
      readFileSync(file, 'utf8')
        .split(/^---$/m)
        .filter((doc) => !/^kind: PodMonitor$/m.test(doc))
        .join('---'),
    );
    const checked = await validate(rest);
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
    // Without a token given, the chart makes one: the pages are never open, and scraped with it.
    const made = await scraped([]);
    const madeToken = made.manifests.find((m) => m.kind === 'Secret').stringData.METRICS_TOKEN;
    expect(madeToken).toMatch(/^[A-Za-z0-9]{40}$/);
    // A new one each render here (no cluster to look the stored one up in): never a fixed default.
    const again = await scraped([]);
    expect(again.manifests.find((m) => m.kind === 'Secret').stringData.METRICS_TOKEN).not.toBe(madeToken);
    for (const monitor of made.monitors)
      expect(monitor.spec.podMetricsEndpoints[0].authorization.credentials).toEqual({
        name: 'mm-mcp-meter-secrets',
        key: 'METRICS_TOKEN',
      });
    // An existing Secret's key is optional, as the services read it.
    const existing = await scraped(['--set', 'existingSecret=mcp-meter-prod']);
    for (const monitor of existing.monitors)
      expect(monitor.spec.podMetricsEndpoints[0].authorization.credentials).toEqual({
        name: 'mcp-meter-prod',
        key: 'METRICS_TOKEN',
        optional: true,
      });
  });

  it("ships the Grafana dashboard in a ConfigMap for Grafana's sidecar when asked", async () => {
    const { file, manifests } = await render(['-f', values, '--set', 'grafanaDashboard.enabled=true']);
    const maps = manifests.filter((m) => m.kind === 'ConfigMap');
    expect(maps.map((m) => m.metadata.name)).toEqual(['mm-mcp-meter-dashboard']);
    expect(maps[0].metadata.labels.grafana_dashboard).toBe('1');
    // The file itself, byte for byte but the trailing newline, and under a ConfigMap's 1 MiB.
    const dashboard = readFileSync(join(chart, 'dashboards', 'mcp-meter.json'), 'utf8');
    expect(maps[0].data['mcp-meter.json']).toBe(dashboard.trimEnd());
    expect(JSON.parse(maps[0].data['mcp-meter.json']).uid).toBe('mcp-meter');
    expect(Buffer.byteLength(dashboard)).toBeLessThan(1024 * 1024);
    const checked = await validate(file);
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
  });

  it('refuses to render without a SECRET_KEY of 64 hex characters', async () => {
    const refused = await render(['-f', values, '--set', 'secretKey=short']).catch(
      (error: { stderr: string }) => error.stderr,
    );
    expect(refused).toContain('secretKey must be 64 hex characters');
  });
});
