/**
 * One poll of the alerts API, against HTTP servers on the loopback that answer what a broken or
 * hostile endpoint might (a real Prometheus is asked in test/integration/coordinator/alert-gate.test.ts):
 * every failure is a reading that holds starts, and no reading ever holds the bearer token.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAlertsAnswer, readPrometheusAlerts, type PrometheusConnection } from '../../../../coordinator/alerts/read-prometheus-alerts.ts';

const TOKEN = 's3cr3t-token-value';
const servers: Server[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((done) => s.close(done));
  }
});

async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handle);
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
}

const connection = (url: string, over: Partial<PrometheusConnection> = {}): PrometheusConnection => ({ url, token: TOKEN, ca: null, insecureSkipVerify: false, timeoutMs: 5_000, ...over });
const answer = (alerts: object[]): string => JSON.stringify({ status: 'success', data: { alerts } });

describe('parseAlertsAnswer', () => {
  it('keeps the firing alerts, named by alertname; pending ones are not read', () => {
    const text = answer([
      { labels: { alertname: 'NodeDown', instance: 'a' }, state: 'firing', activeAt: '2026-11-27T06:00:00Z', value: '1e+00' },
      { labels: { alertname: 'DiskFull' }, state: 'pending' },
    ]);
    expect(parseAlertsAnswer(text)).toEqual({ kind: 'answered', firing: [{ name: 'NodeDown', labels: { alertname: 'NodeDown', instance: 'a' } }] });
  });

  it.each([
    ['not JSON', '<html>502 Bad Gateway</html>'],
    ['an error answer', JSON.stringify({ status: 'error', errorType: 'bad_data', error: 'x' })],
    ['alerts not a list', JSON.stringify({ status: 'success', data: { alerts: 'none' } })],
    ['labels not strings', answer([{ labels: { alertname: 5 }, state: 'firing' }])],
  ])('is null for %s', (_what, text) => {
    expect(parseAlertsAnswer(text)).toBeNull();
  });
});

describe('readPrometheusAlerts', () => {
  it('asks <url>/api/v1/alerts with the bearer token and reads the answer', async () => {
    let asked: { path?: string | undefined; authorization?: string | undefined } = {};
    const url = await serve((req, res) => {
      asked = { path: req.url, authorization: req.headers.authorization };
      res.end(answer([{ labels: { alertname: 'NodeDown' }, state: 'firing' }]));
    });
    const reading = await readPrometheusAlerts(connection(`${url}/prom`), AbortSignal.timeout(10_000));
    expect(asked).toEqual({ path: '/prom/api/v1/alerts', authorization: `Bearer ${TOKEN}` });
    expect(reading).toEqual({ kind: 'answered', firing: [{ name: 'NodeDown', labels: { alertname: 'NodeDown' } }] });
  });

  it('sends no Authorization header without a token', async () => {
    let authorization: string | undefined = 'unset';
    const url = await serve((req, res) => {
      authorization = req.headers.authorization;
      res.end(answer([]));
    });
    expect(await readPrometheusAlerts(connection(url, { token: null }), AbortSignal.timeout(10_000))).toEqual({ kind: 'answered', firing: [] });
    expect(authorization).toBeUndefined();
  });

  it('an HTTP error that echoes the token: the status and the body, the token cut out', async () => {
    const url = await serve((req, res) => {
      res.statusCode = 401;
      res.end(`unauthorized: ${req.headers.authorization ?? ''}`);
    });
    const reading = await readPrometheusAlerts(connection(url), AbortSignal.timeout(10_000));
    expect(reading).toEqual({ kind: 'unanswered', problem: 'HTTP 401: unauthorized: Bearer <token>' });
  });

  it('an answer that is not the alerts API (a proxy\'s page): holds, quoting its start', async () => {
    const url = await serve((_req, res) => {
      res.end('<html><body>Welcome to nginx!</body></html>');
    });
    expect(await readPrometheusAlerts(connection(url), AbortSignal.timeout(10_000))).toEqual({
      kind: 'unanswered',
      problem: "answered something that is not Prometheus's alerts API: <html><body>Welcome to nginx!</body></html>",
    });
  });

  it('nothing listening: the connection error', async () => {
    const url = await serve(() => undefined);
    const closed = servers.pop();
    await new Promise((done) => closed?.close(done));
    const reading = await readPrometheusAlerts(connection(url), AbortSignal.timeout(10_000));
    expect(reading.kind).toBe('unanswered');
    expect(reading.kind === 'unanswered' ? reading.problem : '').toMatch(/^connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
  });

  it('no answer within the timeout: says so', async () => {
    const url = await serve(() => undefined); // accepts, never answers
    expect(await readPrometheusAlerts(connection(url, { timeoutMs: 300 }), AbortSignal.timeout(10_000))).toEqual({ kind: 'unanswered', problem: 'no answer within 0.3s' });
  });

  it('an https URL whose certificate no CA given vouches for: holds with the TLS error', async () => {
    const url = await serve(() => undefined);
    // A plain HTTP server asked over TLS: the handshake fails.
    const reading = await readPrometheusAlerts(connection(url.replace('http:', 'https:'), { timeoutMs: 2_000 }), AbortSignal.timeout(10_000));
    expect(reading.kind).toBe('unanswered');
  });
});
