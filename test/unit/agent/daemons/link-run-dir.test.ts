import { mkdir, mkdtemp, readlink, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkRunDir } from '../../../../agent/daemons/link-run-dir.ts';
import { DriverRootError } from '../../../../agent/root/driver-root.ts';

// A daemon's run dir (/var/run/nvidia-persistenced in the agent's container) made to resolve into
// the driver root's copy, on real directories and a real Unix socket (the one the toolkit mounts).

let work: string;
let count = 0;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'link-run-dir-'));
});
afterAll(() => rm(work, { recursive: true, force: true }));

/** A container's run dir and a copy of a driver root, `layout` applied to the copy. */
async function aNode(layout?: (copy: string) => Promise<void>) {
  const dir = join(work, String(++count));
  const copy = join(dir, 'cache', 'driver-root', 'gpu', 'ab12');
  await mkdir(copy, { recursive: true });
  await layout?.(copy);
  const runDir = { path: join(dir, 'container', 'var', 'run', 'nvidia-persistenced'), inRoot: '/var/run/nvidia-persistenced' };
  return { dir, copy, runDir };
}

function listen(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => {
      socket.end('persistenced\n');
    });
    server.once('error', reject);
    server.listen(path, () => {
      resolve(server);
    });
  });
}

function answer(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect(path);
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
    });
    socket.once('end', () => {
      resolve(text);
    });
    socket.once('error', reject);
  });
}

describe("linkRunDir: a daemon's socket lands where the toolkit looks in the published root", () => {
  it("makes the run dir a link to <root>/var/run/<daemon>: a socket the daemon opens there answers at the root's path", async () => {
    const { copy, runDir } = await aNode();
    expect(await linkRunDir(runDir, copy)).toBe(join(copy, 'var', 'run', 'nvidia-persistenced'));
    const server = await listen(join(runDir.path, 'socket'));
    try {
      // libnvidia-container: NV_PERSISTENCED_SOCKET (/var/run/nvidia-persistenced/socket) inside the driver root.
      expect(await answer(join(copy, 'var', 'run', 'nvidia-persistenced', 'socket'))).toBe('persistenced\n');
    } finally {
      server.close();
    }
  });

  it("follows the root's own links inside it: Debian's var/run -> /run puts it in <root>/run, never the agent's /run", async () => {
    const { copy, runDir } = await aNode(async (c) => {
      await mkdir(join(c, 'var'));
      await symlink('/run', join(c, 'var', 'run'));
    });
    expect(await linkRunDir(runDir, copy)).toBe(join(copy, 'run', 'nvidia-persistenced'));
    expect(await realpath(runDir.path)).toBe(await realpath(join(copy, 'run', 'nvidia-persistenced')));
  });

  it('never leaves the root through ..', async () => {
    const { copy, runDir } = await aNode(async (c) => {
      await mkdir(join(c, 'var'));
      await symlink('../../../../../../run', join(c, 'var', 'run'));
    });
    expect(await linkRunDir(runDir, copy)).toBe(join(copy, 'run', 'nvidia-persistenced'));
  });

  it("replaces what an earlier start left at the run dir (a directory, a link to an older copy), and keeps a link that is already right", async () => {
    const { dir, copy, runDir } = await aNode();
    await mkdir(runDir.path, { recursive: true });
    await writeFile(join(runDir.path, 'nvidia-persistenced.pid'), '42\n');
    const target = await linkRunDir(runDir, copy);
    expect(await readlink(runDir.path)).toBe(target);
    const newer = join(dir, 'cache', 'driver-root', 'gpu', 'cd34');
    await mkdir(newer);
    expect(await linkRunDir(runDir, newer)).toBe(join(newer, 'var', 'run', 'nvidia-persistenced'));
    expect(await readlink(runDir.path)).toBe(join(newer, 'var', 'run', 'nvidia-persistenced'));
    expect(await linkRunDir(runDir, newer)).toBe(join(newer, 'var', 'run', 'nvidia-persistenced'));
  });

  it('refuses a root where a file is in the way, naming it', async () => {
    const { copy, runDir } = await aNode(async (c) => {
      await mkdir(join(c, 'var'));
      await writeFile(join(c, 'var', 'run'), '');
    });
    const error = await linkRunDir(runDir, copy).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DriverRootError);
    expect((error as Error).message).toBe(`${join(copy, 'var', 'run')} is in the way of /var/run/nvidia-persistenced in the driver root ${copy}: not a directory`);
  });
});
