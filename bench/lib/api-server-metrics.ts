import type { KubeConfig } from '@kubernetes/client-node';
import { request } from 'node:https';

/** kube-apiserver's /metrics (Prometheus text), read with the admin credentials of `kc`. */
export async function readApiServerMetrics(kc: KubeConfig, server: string): Promise<string> {
  const opts: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  await kc.applyToHTTPSOptions(opts);
  return await new Promise<string>((resolve, reject) => {
    const req = request(`${server}/metrics`, { ca: opts.ca, cert: opts.cert, key: opts.key }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode === 200) resolve(Buffer.concat(chunks).toString('utf8'));
        else reject(new Error(`GET ${server}/metrics answered ${String(res.statusCode)}`));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The sum of every sample of `metric` whose labels include all of `labels` (e.g. every WATCH on nodes). */
export function sumOfSamples(text: string, metric: string, labels: Readonly<Record<string, string>>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`) && !line.startsWith(`${metric} `)) continue;
    const end = line.lastIndexOf('}');
    const labelText = end === -1 ? '' : line.slice(metric.length + 1, end);
    const present = labelText.split(',');
    if (!wanted.every((w) => present.includes(w))) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) sum += value;
  }
  return sum;
}
