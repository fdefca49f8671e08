/**
 * `node bench/run-label-churn.ts --kubeconfig F --selector S --interval-seconds N`: another
 * writer of the same Nodes, as NFD and GFD are (bench/lib/label-churn.ts): each writer rewrites
 * its labels of every node the selector lists once per N seconds, a JSON Patch with no
 * resourceVersion, the nodes spread evenly over the interval. A write of a node whose previous
 * write by the same writer is still under way is skipped (counted), so the last write a writer
 * saw stored is the value the node must still carry.
 *
 * Prints one JSON line `label churn started` once it writes, and on SIGTERM, after the writes
 * under way have ended, one `label churn stopped` line with its counts and, per writer and node,
 * the generation last stored; then exits 0. Its own process, so that its requests and CPU are
 * another client's, as NFD's and GFD's are.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { parseArgs } from 'node:util';
import { apiErrorMessage } from '../shared/kube/api-error.ts';
import { loadKubeConfig } from '../shared/kube/load-kube-config.ts';
import { JSON_PATCH } from '../shared/kube/patch-options.ts';
import { CHURN_WRITERS, churnDueMs, churnGeneration, labelPatch } from './lib/label-churn.ts';

/** How often due writes are sent: far shorter than any interval, so the rate stays steady. */
const TICK_MS = 20;

const { values } = parseArgs({ options: { kubeconfig: { type: 'string' }, selector: { type: 'string' }, 'interval-seconds': { type: 'string' } } });
const intervalMs = Number(values['interval-seconds']) * 1000;
if (values.kubeconfig === undefined || values.selector === undefined || !(intervalMs > 0)) {
  console.error('usage: run-label-churn.ts --kubeconfig F --selector S --interval-seconds N (N > 0)');
  process.exit(2);
}
const core = loadKubeConfig(values.kubeconfig).makeApiClient(CoreV1Api);
const nodes = (await core.listNode({ labelSelector: values.selector })).items.map((n) => n.metadata?.name ?? '').filter((n) => n !== '').sort();
if (nodes.length === 0) {
  console.error(`no node matches ${values.selector}`);
  process.exit(2);
}

const counts = { sent: 0, stored: 0, failed: 0, skipped: 0 };
const lastStored: Record<string, Record<string, number>> = Object.fromEntries(CHURN_WRITERS.map((w) => [w.name, {}]));
const underWay = new Map<string, Promise<void>>();
const firstErrors: string[] = [];
const sequence = CHURN_WRITERS.map(() => 0);
const started = performance.now();

function write(writerIndex: number, node: string, generation: number): void {
  const writer = CHURN_WRITERS[writerIndex];
  if (writer === undefined) return;
  const key = `${writer.name}/${node}`;
  if (underWay.has(key)) {
    counts.skipped += 1;
    return;
  }
  counts.sent += 1;
  const done = core.patchNode({ name: node, body: labelPatch(writer.labels(generation)) }, JSON_PATCH).then(() => {
    counts.stored += 1;
    const stored = lastStored[writer.name] ?? {};
    stored[node] = Math.max(stored[node] ?? 0, generation);
  }, (error: unknown) => {
    counts.failed += 1;
    if (firstErrors.length < 5) firstErrors.push(`${key}: ${apiErrorMessage(error)}`);
  }).finally(() => underWay.delete(key));
  underWay.set(key, done);
}

const parent = process.ppid;
const ticker = setInterval(() => {
  // The bench that started it is gone (killed): nothing will stop it, so it stops itself.
  if (process.ppid !== parent) process.exit(1);
  const now = performance.now() - started;
  CHURN_WRITERS.forEach((_, w) => {
    for (;;) {
      const s = sequence[w] ?? 0;
      if (churnDueMs(s, nodes.length, intervalMs, w, CHURN_WRITERS.length) > now) break;
      write(w, nodes[s % nodes.length] ?? '', churnGeneration(s, nodes.length));
      sequence[w] = s + 1;
    }
  });
}, TICK_MS);

process.once('SIGTERM', () => {
  clearInterval(ticker);
  void Promise.all(underWay.values()).then(() => {
    const seconds = (performance.now() - started) / 1000;
    console.log(JSON.stringify({ level: 'info', msg: 'label churn stopped', nodes: nodes.length, intervalSeconds: intervalMs / 1000, seconds, ...counts, firstErrors, lastStored }));
    process.exit(0);
  });
});
console.log(JSON.stringify({ level: 'info', msg: 'label churn started', nodes: nodes.length, intervalSeconds: intervalMs / 1000, writers: CHURN_WRITERS.map((w) => w.name) }));
