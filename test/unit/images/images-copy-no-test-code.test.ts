import { spawnSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');
const DOCKERFILES = ['Dockerfile.agent', 'Dockerfile.init'];

/** The build-context sources of every COPY that does not read from another stage. */
async function copiedSources(dockerfile: string): Promise<string[]> {
  const text = await readFile(join(ROOT, dockerfile), 'utf8');
  return text
    .split('\n')
    .filter((line) => /^COPY\s/i.test(line) && !/--from=/i.test(line))
    .flatMap((line) => line.trim().split(/\s+/).slice(1, -1))
    .filter((arg) => !arg.startsWith('--'));
}

async function tsFilesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

describe('the images', () => {
  it.each(DOCKERFILES)('%s copies named folders only, never test/ or the whole context', async (dockerfile) => {
    const sources = await copiedSources(dockerfile);
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) {
      expect(source).not.toMatch(/^(\.\/?|test(\/.*)?|\.\/test(\/.*)?|demo(\/.*)?|\*)$/);
    }
  });

  it('.dockerignore keeps test/, demo/, node_modules and .git out of the build context', async () => {
    const ignored = (await readFile(join(ROOT, '.dockerignore'), 'utf8')).split('\n').map((l) => l.trim());
    expect(ignored).toEqual(expect.arrayContaining(['test', 'demo', 'node_modules', '.git']));
  });

  it('no file in a copied folder imports from test/ (where the test doubles live)', async () => {
    const folders = new Set((await Promise.all(DOCKERFILES.map(copiedSources))).flat().filter((s) => !s.includes('.')));
    const offenders: string[] = [];
    for (const folder of folders) {
      for (const file of await tsFilesUnder(folder)) {
        if (/from\s+['"](\.\.\/)+test\//.test(await readFile(file, 'utf8'))) offenders.push(file);
      }
    }
    expect([...folders].sort()).toEqual(['agent', 'coordinator', 'init-container', 'shared']);
    expect(offenders).toEqual([]);
  });

  it("the image's agent entry point refuses the simulated kernel (exit 2, naming the flag)", () => {
    const result = spawnSync(NODE, [join(ROOT, 'agent/main.ts'), '--kernel', 'simulated'], {
      env: {
        NODE_NAME: 'n1',
        POD_NAME: 'p1',
        POD_NAMESPACE: 'driver-rollout',
        DRIVER_NAME: 'gpu',
        DRIVER_VERSION: '1.0.0',
        DRIVER_SOURCE_DIR: '/nonexistent',
        LOG_LEVEL: 'silent',
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--kernel / KERNEL_ADAPTER: simulated is a test double');
  });
});
