// The container's health check (Dockerfile HEALTHCHECK, Compose, Kubernetes exec probes): asks
// /healthz of the service this container runs. SERVICES decides which: the control plane's PORT
// when it runs here (all-in-one included), else the proxy's PROXY_PORT; ingest alone answers on
// INGEST_METRICS_PORT when it is set, and without it serves no HTTP, so it is healthy while its
// process runs. Exit 0 when healthy, 1 otherwise.
const services = (process.env.SERVICES ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const runs = (name) => services.length === 0 || services.includes(name);
const port = runs('control-plane')
  ? (process.env.PORT ?? '8080')
  : runs('proxy')
    ? (process.env.PROXY_PORT ?? '8081')
    : process.env.INGEST_METRICS_PORT;
if (port === undefined) process.exit(0);
try {
  const answer = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2500) });
  process.exit(answer.ok ? 0 : 1);
} catch {
  process.exit(1);
}
