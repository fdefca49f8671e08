import { spawn } from 'node:child_process';
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch } from 'undici';
import { stringify } from 'yaml';
import { runCachedBuild } from './ensure-binaries.ts';
import { freePort } from './free-port.ts';
import { waitUntil } from './wait-until.ts';

const ROOT = join(import.meta.dirname, '../..');

export interface PrometheusAlert { labels: Record<string, string>; state: string; value: string }

export interface PrometheusOptions {
  /** host:port targets scraped every second (one job, honor_labels, as the chart's ServiceMonitor). */
  readonly targets: readonly string[];
  /** Rule groups, evaluated every second. */
  readonly ruleGroups: readonly object[];
  /** Serve HTTPS with this certificate and key (PEM files): Prometheus's --web.config.file tls_server_config. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string; readonly caFile: string };
}

export interface PrometheusServer {
  /** Its base URL, http://127.0.0.1:<port> (https:// with `tls`). */
  readonly url: string;
  query(q: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  alerts(): Promise<PrometheusAlert[]>;
  /** Stops it (SIGTERM) and waits for its exit; its directory is removed. Idempotent. */
  stop(): Promise<void>;
}

/** The Prometheus and promtool binaries' directory (test/bed/fetch-prometheus.sh: Debian bookworm's package, cached). */
export async function prometheusBinDir(): Promise<string> {
  return await runCachedBuild(join(ROOT, 'test/bed/fetch-prometheus.sh'));
}

/**
 * A real Prometheus on the loopback, scraping `targets` and evaluating `ruleGroups` every second,
 * ready when this resolves. The caller stops it (`stop`), also when its test fails.
 */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusServer> {
  const [bin, port] = await Promise.all([prometheusBinDir(), freePort()]);
  const dir = await mkdtemp(join(tmpdir(), 'drtest-prometheus-'));
  await writeFile(join(dir, 'rules.yaml'), stringify({ groups: options.ruleGroups }));
  await writeFile(join(dir, 'prometheus.yaml'), stringify({
    global: { scrape_interval: '1s', evaluation_interval: '1s' },
    rule_files: [join(dir, 'rules.yaml')],
    scrape_configs: [{ job_name: 'driver-rollout-test', honor_labels: true, static_configs: [{ targets: options.targets }] }],
  }));
  const args = [`--config.file=${join(dir, 'prometheus.yaml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${String(port)}`];
  if (options.tls !== undefined) {
    await writeFile(join(dir, 'web.yaml'), stringify({ tls_server_config: { cert_file: options.tls.certFile, key_file: options.tls.keyFile } }));
    args.push(`--web.config.file=${join(dir, 'web.yaml')}`);
  }
  const url = `${options.tls === undefined ? 'http' : 'https'}://127.0.0.1:${String(port)}`;
  const dispatcher = new Agent({ connect: options.tls === undefined ? {} : { ca: await readFile(options.tls.caFile, 'utf8') } });
  const log = await open(join(dir, 'prometheus.log'), 'w');
  const child = spawn(join(bin, 'prometheus'), args, { stdio: ['ignore', log.fd, log.fd] });
  const exited = new Promise<void>((done) => child.once('exit', () => {
    done();
  }));
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      child.kill('SIGTERM');
      await exited;
      await log.close();
      await dispatcher.close();
      await rm(dir, { recursive: true, force: true });
    })();
    return stopping;
  };
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}${path}`, { dispatcher, signal: AbortSignal.timeout(5_000) });
    const body = (await response.json()) as { status: string; data: T };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: ${JSON.stringify(body)}`);
    return body.data;
  };
  try {
    await waitUntil('Prometheus to be ready', async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited ${String(child.exitCode)}:\n${await readFile(join(dir, 'prometheus.log'), 'utf8')}`);
      return await fetch(`${url}/-/ready`, { dispatcher }).then((r) => (r.ok ? true : undefined), () => undefined);
    }, { timeoutMs: 60_000, intervalMs: 500 });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    query: async (q) => (await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(`/api/v1/query?query=${encodeURIComponent(q)}`)).result,
    alerts: async () => (await api<{ alerts: PrometheusAlert[] }>('/api/v1/alerts')).alerts,
    stop,
  };
}
