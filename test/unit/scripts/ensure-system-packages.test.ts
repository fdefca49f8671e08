import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const SCRIPT = resolve(import.meta.dirname, '../../../scripts/ensure-system-packages.sh');

async function packages(profile: string): Promise<string[]> {
  const { stdout } = await run('bash', [SCRIPT, profile, '--list']);
  return stdout.trim().split('\n');
}

describe('scripts/ensure-system-packages.sh', () => {
  it('installs for the demo (npm start) only what it needs: headers, kmod, make, gcc, openssl; no QEMU, no kernel image', async () => {
    expect((await packages('demo')).sort()).toEqual(['gcc', 'kmod', 'linux-headers-amd64', 'make', 'openssl']);
  });

  it('adds for the tests (npm test) the QEMU kernel tests\' packages', async () => {
    expect((await packages('test')).sort()).toEqual(['busybox-static', 'gcc', 'kmod', 'linux-headers-amd64', 'linux-image-amd64', 'make', 'openssl', 'qemu-system-x86']);
  });

  it('refuses an unknown profile with exit 2', async () => {
    await expect(run('bash', [SCRIPT, 'everything'])).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining("unknown profile 'everything'") as unknown });
  });
});
