/**
 * The pool against a real HTTPS server on loopback standing in for the API server (only what
 * these requests need: a pod list, a node patch, a watch that the server ends, as kube-apiserver
 * does at timeoutSeconds). The server counts the TLS connections it accepts.
 */
import { CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../../shared/kube/patch-options.ts';
import { shareApiConnections } from '../../../../shared/kube/share-api-connections.ts';
import { generatePki, type Pki } from '../../../bed/generate-pki.ts';

let dir = '';
let pki: Pki;
let server: Server;
let port = 0;
let accepted = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'api-pool-'));
  pki = await generatePki(dir);
  server = createServer({ cert: await readFile(pki.serverCert), key: await readFile(pki.serverKey) }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://x');
    req.resume();
    res.setHeader('Content-Type', 'application/json');
    if (url.searchParams.get('watch') === 'true') {
      res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '2' } } })}\n`);
      setTimeout(() => res.end(), 50); // the server ends the watch (timeoutSeconds)
      return;
    }
    if (req.method === 'PATCH') {
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', resourceVersion: '3' } }));
      return;
    }
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '1' }, items: [] }));
  });
  server.on('secureConnection', () => {
    accepted += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  port = typeof address === 'object' && address !== null ? address.port : 0;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, caFile: pki.caCert, skipTLSVerify: false }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

async function traffic(kc: KubeConfig): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  let requests = 0;
  for (let i = 0; i < 20; i++) {
    await core.listNamespacedPod({ namespace: 'x' });
    requests += 1;
  }
  await Promise.all(Array.from({ length: 30 }, async () => {
    await core.patchNode({ name: 'n1', body: { metadata: { labels: { a: 'b' } } } }, MERGE_PATCH);
    requests += 1;
  }));
  for (let i = 0; i < 3; i++) {
    await new Promise<void>((resolve, reject) => {
      void new Watch(kc).watch('/api/v1/pods', {}, () => undefined, (err: unknown) => {
        if (err === null || err === undefined) resolve();
        else reject(err instanceof Error ? err : new Error('watch failed'));
      });
    });
    requests += 1;
  }
  return requests;
}

describe('one keep-alive pool per program, counted at the server', () => {
  it('client-node alone: one new TLS connection per request', async () => {
    const before = accepted;
    const requests = await traffic(kubeConfig());
    expect(accepted - before).toBe(requests);
  });

  it('shared: 50 requests (20 one after another, 30 at once) over at most 8 connections; a watch has its own', async () => {
    const before = accepted;
    const requests = await traffic(shareApiConnections(kubeConfig()));
    expect(requests).toBe(53);
    // client-node aborts a watch's fetch when it ends, which closes that connection: one per watch.
    expect(accepted - before).toBeLessThanOrEqual(8 + 3);
    expect(accepted - before).toBeGreaterThanOrEqual(3);
  });
});
