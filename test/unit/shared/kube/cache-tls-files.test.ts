import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, RequestContext } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cacheTlsFiles } from '../../../../shared/kube/cache-tls-files.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cache-tls-files-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A kubeconfig whose CA, client certificate and key are files in `dir`. */
function fileKubeConfig(): KubeConfig {
  writeFileSync(join(dir, 'ca.crt'), 'ca-1');
  writeFileSync(join(dir, 'client.crt'), 'cert-1');
  writeFileSync(join(dir, 'client.key'), 'key-1');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caFile: join(dir, 'ca.crt'), skipTLSVerify: false, tlsServerName: 'api' }],
    users: [{ name: 'u', certFile: join(dir, 'client.crt'), keyFile: join(dir, 'client.key'), impersonateUser: 'someone' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

/** The TLS material and headers client-node would send a request with. */
async function requestOptions(kc: KubeConfig): Promise<{ ca: string; cert: string; key: string; servername: unknown; headers: Record<string, string> }> {
  const opts: { ca?: Buffer; cert?: Buffer; key?: Buffer; servername?: unknown; headers?: Record<string, string> } = {};
  // client-node's own step that reads the files and sets the headers (private in its typings).
  await (kc as unknown as { applyOptions: (o: typeof opts) => Promise<void> }).applyOptions(opts);
  return { ca: String(opts.ca), cert: String(opts.cert), key: String(opts.key), servername: opts.servername, headers: opts.headers ?? {} };
}

function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let at = 1_000;
  return { now: () => at, advance: (ms) => { at += ms; } };
}

describe('cacheTlsFiles', () => {
  it('sends the files\' contents and keeps every other setting of the cluster and user', async () => {
    const kc = cacheTlsFiles(fileKubeConfig(), { recheckMs: 10_000, now: manualClock().now });
    expect(await requestOptions(kc)).toEqual({ ca: 'ca-1', cert: 'cert-1', key: 'key-1', servername: 'api', headers: { 'Impersonate-User': 'someone' } });
    expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
  });

  it('reads the files again once the recheck interval has passed, not on every request', async () => {
    const clock = manualClock();
    const kc = cacheTlsFiles(fileKubeConfig(), { recheckMs: 10_000, now: clock.now });
    expect((await requestOptions(kc)).ca).toBe('ca-1');
    writeFileSync(join(dir, 'ca.crt'), 'ca-2');
    writeFileSync(join(dir, 'client.crt'), 'cert-2');
    clock.advance(9_999);
    expect(await requestOptions(kc)).toMatchObject({ ca: 'ca-1', cert: 'cert-1' });
    clock.advance(1);
    expect(await requestOptions(kc)).toMatchObject({ ca: 'ca-2', cert: 'cert-2', key: 'key-1' });
  });

  it('without a cache, client-node reads a rotated file on the very next request', async () => {
    const kc = fileKubeConfig();
    expect((await requestOptions(kc)).ca).toBe('ca-1');
    writeFileSync(join(dir, 'ca.crt'), 'ca-2');
    expect((await requestOptions(kc)).ca).toBe('ca-2');
  });

  it('fails a request whose file is gone the way client-node does, naming the file', async () => {
    const clock = manualClock();
    const kc = cacheTlsFiles(fileKubeConfig(), { recheckMs: 10_000, now: clock.now });
    await requestOptions(kc);
    rmSync(join(dir, 'client.key'));
    clock.advance(10_000);
    await expect(requestOptions(kc)).rejects.toThrow(/client\.key/);
  });

  it('leaves inline material and in-cluster token files alone', async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from('inline-ca').toString('base64'), skipTLSVerify: false }],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });
    const cached = cacheTlsFiles(kc, { recheckMs: 10_000, now: manualClock().now });
    const context = new RequestContext('https://127.0.0.1:6443/api/v1/nodes', 'GET');
    await cached.applySecurityAuthentication(context);
    expect(context.getHeaders().Authorization).toBe('Bearer secret-token');
    expect((await requestOptions(cached)).ca).toBe('inline-ca');
  });
});
