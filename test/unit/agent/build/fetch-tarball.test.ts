import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SourceChecksumError, SourceFetchError } from '../../../../agent/build/build-errors.ts';
import { fetchTarball } from '../../../../agent/build/fetch-tarball.ts';

/** What the local server does for the next requests of a path, one script entry per request. */
type Reply = 'ok' | 'truncate' | { status: number };

const payload = Buffer.alloc(256 * 1024, 'driver sources ');
const payloadSha256 = createHash('sha256').update(payload).digest('hex');

describe('fetchTarball against a local HTTP server on 127.0.0.1', () => {
  let server: Server;
  let baseUrl: string;
  let script: Reply[];
  let requests: number;
  let dir: string;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      const reply = script.shift() ?? 'ok';
      if (reply === 'ok') {
        res.writeHead(200, { 'content-length': payload.length });
        res.end(payload);
      } else if (reply === 'truncate') {
        res.writeHead(200, { 'content-length': payload.length });
        res.write(payload.subarray(0, 1000), () => res.destroy());
      } else {
        res.writeHead(reply.status);
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    dir = await mkdtemp(join(tmpdir(), 'fetch-tarball-'));
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    script = [];
    requests = 0;
  });

  function fetchOnce(sha256: string, logs: unknown[] = []): Promise<void> {
    const logger = pino({ level: 'info' }, new Writable({ write: (line: Buffer, _enc, done) => { logs.push(JSON.parse(line.toString())); done(); } }));
    return fetchTarball({ url: `${baseUrl}/driver.tar.gz`, sha256, destination: join(dir, 'driver.tar.gz'), logger, attempts: 3, backoffMs: 5 });
  }

  it('downloads, verifies the sha256 and logs progress', async () => {
    const logs: { msg?: string; percent?: number }[] = [];
    await fetchOnce(payloadSha256, logs);
    expect(await readFile(join(dir, 'driver.tar.gz'))).toEqual(payload);
    expect(logs.filter((l) => l.msg === 'driver source download progress').at(-1)?.percent).toBe(100);
  });

  it.each<[string, Reply[], number]>([
    ['HTTP 503 then success', [{ status: 503 }], 2],
    ['a body cut short then success', ['truncate'], 2],
    ['HTTP 429, HTTP 500, then success', [{ status: 429 }, { status: 500 }], 3],
  ])('retries with backoff: %s', async (_name, replies, expectedRequests) => {
    script = [...replies];
    await fetchOnce(payloadSha256);
    expect(requests).toBe(expectedRequests);
  });

  it('gives up after the configured attempts and leaves no partial file', async () => {
    script = [{ status: 502 }, { status: 502 }, { status: 502 }];
    await expect(fetchOnce(payloadSha256)).rejects.toThrow(/failed after 3 attempts.*HTTP 502/);
    await expect(stat(join(dir, 'driver.tar.gz'))).rejects.toThrow(/ENOENT/);
  });

  it('does not retry a 404', async () => {
    script = [{ status: 404 }];
    await expect(fetchOnce(payloadSha256)).rejects.toBeInstanceOf(SourceFetchError);
    expect(requests).toBe(1);
  });

  it('refuses a file whose sha256 differs, without retrying', async () => {
    const attempt = fetchOnce('0'.repeat(64));
    await expect(attempt).rejects.toBeInstanceOf(SourceChecksumError);
    await expect(attempt).rejects.toThrow(new RegExp(`sha256 of .* is ${payloadSha256}, expected 0{64}`));
    expect(requests).toBe(1);
    await expect(stat(join(dir, 'driver.tar.gz'))).rejects.toThrow(/ENOENT/);
  });
});
