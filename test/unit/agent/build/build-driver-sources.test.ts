import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { c as createTar } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModuleSigningError, SourceChecksumError } from '../../../../agent/build/build-errors.ts';
import { buildSampleDriver, SAMPLE_DRIVER_DIR } from './sample-driver.ts';

const run = promisify(execFile);

describe('buildDriver from a tarball served on 127.0.0.1 (real kbuild)', () => {
  let scratch: string;
  let server: Server;
  let requests: number;
  let url: string;
  let sha256: string;

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'build-tarball-'));
    const tarball = join(scratch, 'drsample-1.0.0.tar.gz');
    await createTar({ gzip: true, file: tarball, cwd: SAMPLE_DRIVER_DIR, prefix: 'drsample-1.0.0' }, ['.']);
    const bytes = await readFile(tarball);
    sha256 = createHash('sha256').update(bytes).digest('hex');
    requests = 0;
    server = createServer((_req, res) => {
      requests++;
      // The first request fails: the build must retry, not fail.
      if (requests === 1) {
        res.writeHead(503).end();
        return;
      }
      res.writeHead(200, { 'content-length': bytes.length }).end(bytes);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/drsample-1.0.0.tar.gz`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(scratch, { recursive: true, force: true });
  });

  it('downloads (retrying a 503), verifies, unpacks with strip and compiles; a second run hits the cache without downloading', async () => {
    const source = { kind: 'tarball' as const, url, sha256, stripComponents: 1 };
    const first = await buildSampleDriver('1.0.0', join(scratch, 'cache'), { source, workDir: scratch, fetchBackoffMs: 5 });
    expect(first.cacheHit).toBe(false);
    expect(first.modules.map((m) => m.name)).toEqual(['drsample_core', 'drsample_net']);
    expect(requests).toBe(2);
    const second = await buildSampleDriver('1.0.0', join(scratch, 'cache'), { source, workDir: scratch });
    expect(second.cacheHit).toBe(true);
    expect(requests).toBe(2);
  }, 120_000);

  it('a tarball with another sha256 than configured is not built', async () => {
    const source = { kind: 'tarball' as const, url, sha256: 'f'.repeat(64), stripComponents: 1 };
    await expect(buildSampleDriver('1.0.0', join(scratch, 'cache'), { source, workDir: scratch })).rejects.toBeInstanceOf(SourceChecksumError);
  });
});

describe('buildDriver with module signing (real sign-file from the headers)', () => {
  let scratch: string;
  let signing: { privateKeyPath: string; certificatePath: string };

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'build-signing-'));
    signing = { privateKeyPath: join(scratch, 'signing_key.pem'), certificatePath: join(scratch, 'signing_cert.pem') };
    await run('openssl', ['req', '-new', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=driver-rollout test signing key',
      '-keyout', signing.privateKeyPath, '-out', signing.certificatePath]);
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('signs every module with the mounted key; signed and unsigned builds are cached apart', async () => {
    const signed = await buildSampleDriver('1.0.0', join(scratch, 'cache'), { signing, workDir: scratch });
    expect(signed.signed).toBe(true);
    for (const m of signed.modules) {
      const { stdout } = await run('modinfo', ['-F', 'signer', m.path]);
      expect(stdout.trim()).toBe('driver-rollout test signing key');
    }
    const unsigned = await buildSampleDriver('1.0.0', join(scratch, 'cache'), { workDir: scratch });
    expect(unsigned.cacheKey).not.toBe(signed.cacheKey);
    expect(unsigned.cacheHit).toBe(false);
    expect((await run('modinfo', ['-F', 'signer', unsigned.modules[0]?.path ?? ''])).stdout.trim()).toBe('');
    expect(unsigned.modules.map((m) => m.srcversion)).toEqual(signed.modules.map((m) => m.srcversion));
  }, 120_000);

  it('an unusable key ends in a ModuleSigningError quoting sign-file', async () => {
    const badKey = join(scratch, 'not-a-key.pem');
    await writeFile(badKey, 'not a key\n');
    const attempt = buildSampleDriver('1.0.0', join(scratch, 'cache-bad'), { signing: { ...signing, privateKeyPath: badKey }, workDir: scratch });
    await expect(attempt).rejects.toBeInstanceOf(ModuleSigningError);
    await expect(attempt).rejects.toThrow(/signing .*drsample_core\.ko failed/);
  }, 120_000);
});
