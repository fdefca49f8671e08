import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../../..');
const read = async (file: string): Promise<string> => await readFile(resolve(REPO, file), 'utf8');
const bases = (dockerfile: string): string[] => [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1] ?? '');

describe('Dockerfile.agent and Dockerfile.init', () => {
  it('start from one pinned base whose Node.js version is the one the project is tested with', async () => {
    const all = [...bases(await read('Dockerfile.agent')), ...bases(await read('Dockerfile.init'))];
    expect(new Set(all).size).toBe(1);
    const pkg = JSON.parse(await read('package.json')) as { devDependencies: Record<string, string> };
    expect(all[0]).toBe(`node:${pkg.devDependencies.node}-bookworm-slim`);
  });

  it('keep node_modules, tests and test doubles out of the build context (.dockerignore)', async () => {
    const ignored = (await read('.dockerignore')).split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'test']));
  });

  it('install production dependencies only, and the init image runs as non-root', async () => {
    for (const file of ['Dockerfile.agent', 'Dockerfile.init']) expect(await read(file)).toContain('npm ci --omit=dev');
    expect(await read('Dockerfile.init')).toMatch(/^USER 65532:65532$/m);
  });
});
