import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInformer, type ResourceInformer } from '../../../coordinator/cluster/resource-informer.ts';
import { startControlPlane, type ControlPlane } from '../../bed/control-plane.ts';
import { waitUntil } from '../../bed/wait-until.ts';

// Its own `api` control plane: restarting the shared API server would disturb every other test.
let plane: ControlPlane;
let informer: ResourceInformer<V1ConfigMap> | undefined;

beforeAll(async () => {
  plane = await startControlPlane({ profile: 'api' });
});

afterAll(async () => {
  await informer?.stop();
  await plane.stop();
});

describe('startInformer against a real API server', () => {
  it('keeps its cache and indexes current, and restarts by itself after the API server went away', async () => {
    const kc = plane.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    let changes = 0;
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => { warnings.push((JSON.parse(line) as { msg: string }).msg); } });
    informer = startInformer<V1ConfigMap>({
      kc,
      path: '/api/v1/namespaces/default/configmaps',
      list: () => core.listNamespacedConfigMap({ namespace: 'default' }),
      logger,
      onChange: () => { changes += 1; },
      indexes: { colour: (cm) => cm.data?.colour },
      minBackoffMs: 100,
      maxBackoffMs: 500,
    });
    await informer.synced;
    const cache = informer;
    const create = (name: string, colour: string): Promise<V1ConfigMap> =>
      core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name }, data: { colour } } });

    await create('a', 'red');
    await waitUntil('a in the cache', () => Promise.resolve(cache.get('default', 'a') !== undefined ? true : undefined));
    expect([...cache.byIndex('colour', 'red')].map((c) => c.metadata?.name)).toEqual(['a']);
    await core.replaceNamespacedConfigMap({ name: 'a', namespace: 'default', body: { metadata: { name: 'a' }, data: { colour: 'blue' } } });
    await waitUntil('a re-indexed', () => Promise.resolve([...cache.byIndex('colour', 'blue')].length === 1 ? true : undefined));
    expect([...cache.byIndex('colour', 'red')]).toEqual([]);

    await plane.restartApiServer();
    const before = changes;
    await create('b', 'green');
    await core.deleteNamespacedConfigMap({ name: 'a', namespace: 'default' });
    await waitUntil('the watch to be back', () => Promise.resolve(cache.get('default', 'b') !== undefined && cache.get('default', 'a') === undefined ? true : undefined), { timeoutMs: 30_000 });
    expect(changes).toBeGreaterThan(before);
    expect([...cache.byIndex('colour', 'blue')]).toEqual([]);
    expect(cache.isSynced()).toBe(true);
    // client-node's ListWatch stopped on the connection error; our restart brought it back.
    expect(warnings).toContain('watch failed; restarting');
  });
});
