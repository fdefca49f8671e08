import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../../..');

async function start(program: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [resolve(REPO, program), ...args], { env: { PATH: process.env.PATH }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

// The entrypoints of the images (Dockerfile.agent, Dockerfile.init, manifests/coordinator.yaml),
// started as the container runtime starts them.
describe.each([
  ['agent/main.ts', 'NODE_NAME'],
  ['init-container/main.ts', 'SAFE_LOAD_ENABLED'],
  ['coordinator/main.ts', '--lease-name'],
])('%s', (program, aSetting) => {
  it('answers --help with its usage and settings, exit 0, without needing any configuration', { timeout: 60_000 }, async () => {
    const result = await start(program, '--help');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Usage: node');
    expect(result.stdout).toContain(aSetting);
    expect(result.stdout).toMatch(/Exit codes: .*2 bad configuration/);
  });

  it('refuses an unknown flag with exit 2 (bad configuration), naming it', { timeout: 60_000 }, async () => {
    const result = await start(program, '--no-such-flag');
    expect(result.code).toBe(2);
    expect(result.stdout + result.stderr).toContain('no-such-flag');
  });
});
