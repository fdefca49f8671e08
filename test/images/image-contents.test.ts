import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCachedBuild } from '../bed/ensure-binaries.ts';
import { readImageArchive, type ImageArchive } from './read-image-archive.ts';

// The image tarballs the real node runs (build-images.sh: Dockerfile.agent and Dockerfile.init
// built unchanged with buildah; cached, so warm this costs only the reading), read back layer by layer.

const REPO = resolve(import.meta.dirname, '../..');
let imagesDir: string;
let version: string;
/** Packages the lockfile marks dev-only (needed by no production dependency): never in /app/node_modules. */
let devOnly: string[];
beforeAll(async () => {
  imagesDir = await runCachedBuild(join(REPO, 'test/images/build-images.sh'));
  version = (JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
  const lock = JSON.parse(await readFile(join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  devOnly = Object.entries(lock.packages).filter(([path, p]) => path.startsWith('node_modules/') && p.dev === true).map(([path]) => path);
});
/** Test doubles and tests: never in an image (house style). */
const TEST_ONLY = [/(^|\/)test\//, /\/in-memory-[^/]*\.ts$/, /\/simulated-[^/]*\.ts$/, /\.test\.ts$/, /(^|\/)doubles\//];

const appFiles = (image: ImageArchive): string[] => [...image.files].filter((f) => f.startsWith('app/')).sort();

describe.each([
  ['agent', ['app/agent/main.ts', 'app/coordinator/main.ts', 'app/shared/keys.ts']],
  ['init-container', ['app/init-container/main.ts', 'app/shared/keys.ts']],
])('the %s image', (name, expected) => {
  it('holds its program, shared/ and production dependencies, and no test double, test or dev dependency', { timeout: 300_000 }, async () => {
    const image = await readImageArchive(join(imagesDir, `${name}.tar`));
    const files = appFiles(image);
    expect(files).toEqual(expect.arrayContaining(expected));
    expect(files.filter((f) => !f.startsWith('app/node_modules/')).filter((f) => TEST_ONLY.some((re) => re.test(f)))).toEqual([]);
    expect(devOnly).toEqual(expect.arrayContaining(['node_modules/vitest', 'node_modules/typescript', 'node_modules/node']));
    expect(devOnly.filter((path) => image.files.has(`app/${path}/package.json`))).toEqual([]);
    expect(files).toContain('app/node_modules/@kubernetes/client-node/package.json');
    expect(image.repoTags).toContain(`docker.io/driver-rollout/${name}:${version}`);
    expect(image.config.Entrypoint?.[0]).toBe('node');
    expect(image.files).toContain('usr/local/bin/node');
  });
});

describe('the init-container image', () => {
  it('runs as a non-root user', { timeout: 300_000 }, async () => {
    const image = await readImageArchive(join(imagesDir, 'init-container.tar'));
    expect(image.config.User).toBe('65532:65532');
  });
});
