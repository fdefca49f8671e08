import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCachedBuild } from '../bed/ensure-binaries.ts';

// The programs started inside the built images (from the tarballs the real node imports), as the
// container runtime starts them: each answers --help (exit 0) and refuses a bad flag (exit 2) with
// the image's own Node.js and production dependencies; the agent image has the module toolchain.

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
let imagesDir: string;
beforeAll(async () => {
  imagesDir = await runCachedBuild(join(REPO, 'test/images/build-images.sh'));
});

/** Runs `script` with sh in the image; returns `name=exit code` pairs it echoed, and its whole output. */
async function inImage(image: string, script: string): Promise<{ codes: Record<string, number>; output: string }> {
  const { stdout, stderr } = await run('bash', [join(REPO, 'test/images/run-in-image.sh'), join(imagesDir, `${image}.tar`), '--', 'sh', '-c', script], {
    maxBuffer: 16 * 1024 * 1024, timeout: 240_000,
  });
  const codes = Object.fromEntries([...stdout.matchAll(/^code (\S+)=(\d+)$/gm)].map((m) => [m[1] ?? '', Number(m[2])]));
  return { codes, output: stdout + stderr };
}

/** Shell lines that run `command` quietly and echo its exit code as `code <name>=N`. */
const probe = (name: string, command: string): string => `${command} >/tmp/${name}.out 2>&1; echo "code ${name}=$?"`;

describe('the programs in their images', () => {
  it('agent image: agent and coordinator answer --help (0) and a bad flag (2); gcc, make, kmod and dkms are there, g++ is not', { timeout: 300_000 }, async () => {
    const { codes, output } = await inImage('agent', [
      probe('agent-help', 'node agent/main.ts --help'),
      probe('agent-bad', 'node agent/main.ts --no-such-flag'),
      probe('coordinator-help', 'node coordinator/main.ts --help'),
      probe('coordinator-bad', 'node coordinator/main.ts --no-such-flag'),
      probe('toolchain', 'gcc --version && make --version && modprobe --version && dkms --version'),
      probe('gxx', 'test -e /usr/bin/g++'),
      probe('agent-usage', 'grep -q "Usage: node agent/main.ts" /tmp/agent-help.out'),
    ].join('\n'));
    expect(codes, output).toEqual({ 'agent-help': 0, 'agent-bad': 2, 'coordinator-help': 0, 'coordinator-bad': 2, toolchain: 0, gxx: 1, 'agent-usage': 0 });
  });

  it('init-container image: answers --help (0) and a bad flag (2), as uid 65532', { timeout: 300_000 }, async () => {
    const { codes, output } = await inImage('init-container', [
      probe('help', 'node init-container/main.ts --help'),
      probe('bad', 'node init-container/main.ts --no-such-flag'),
      probe('usage', 'grep -q "Usage: node init-container/main.ts" /tmp/help.out'),
      'echo "code uid=$(id -u)"',
    ].join('\n'));
    expect(codes, output).toEqual({ help: 0, bad: 2, usage: 0, uid: 65532 });
  });
});
