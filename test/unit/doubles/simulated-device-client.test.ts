import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findDeviceUsers } from '../../../agent/kernel/find-device-users.ts';
import { ModuleBusyError } from '../../../agent/kernel/kernel-errors.ts';
import { SimulatedKernel } from '../../doubles/simulated-kernel.ts';
import { aSampleDriver, aScratch, type Scratch } from '../agent/kernel/fixtures.ts';

const CLIENT = resolve(import.meta.dirname, '../../doubles/simulated-device-client.ts');

interface Client {
  readonly child: ChildProcess;
  /** Resolves with the first stdout line starting with `prefix`, rejects if the process ends first. */
  line(prefix: string): Promise<string>;
  /** Exit code and signal, once it has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Whether it had exited when asked (the hold must outlive the open). */
  hasExited(): boolean;
  stderr(): string;
}

function startClient(deviceDir: string, module: string): Client {
  const child = spawn(process.execPath, [CLIENT], { env: { PATH: process.env.PATH ?? '', SIMULATED_DEVICE_DIR: deviceDir, DEVICE_MODULE: module }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  let exitedAt: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((settle) => {
    child.once('exit', (code, signal) => {
      exitedAt = { code, signal };
      settle(exitedAt);
    });
  });
  const lines: string[] = [];
  const waiters: { prefix: string; resolve: (line: string) => void }[] = [];
  const reader = createInterface({ input: child.stdout });
  reader.on('line', (line) => {
    lines.push(line);
    for (const w of waiters.filter((x) => line.startsWith(x.prefix))) w.resolve(line);
  });
  return {
    child,
    exited,
    hasExited: () => exitedAt !== undefined,
    stderr: () => stderr,
    line: (prefix) =>
      new Promise<string>((resolveLine, reject) => {
        const seen = lines.find((l) => l.startsWith(prefix));
        if (seen !== undefined) {
          resolveLine(seen);
          return;
        }
        waiters.push({ prefix, resolve: resolveLine });
        reader.once('close', () => {
          reject(new Error(`the client ended before printing "${prefix}…" (stdout ${JSON.stringify(lines)}, stderr ${JSON.stringify(stderr)})`));
        });
      }),
  };
}

// The device client the process kubelet runs as a device plugin in integration tests
// (device-clients-agent.test.ts): a real Node process, as there.
describe('the simulated device client (test double)', () => {
  let scratch: Scratch;
  let client: Client | undefined;

  beforeEach(async () => {
    scratch = await aScratch('simulated-device-client-');
  });
  afterEach(async () => {
    if (client !== undefined && !client.hasExited()) {
      client.child.kill('SIGKILL');
      await client.exited;
    }
    client = undefined;
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it('keeps the module’s device file open after opening it, so the kernel cannot unload the module, and closes it and exits 0 on SIGTERM', async () => {
    const deviceDir = join(scratch.dir, 'dev');
    const kernel = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, deviceDir });
    await kernel.installModules(scratch.tree, 'drsample', aSampleDriver('1.0.0').modules);
    await kernel.load(scratch.tree, 'drsample_net');
    const path = join(deviceDir, 'drsample_net');
    client = startClient(deviceDir, 'drsample_net');
    expect(await client.line('holding')).toBe(`holding ${path} open (pid ${String(client.child.pid)})`);

    // Found in /proc as the agent finds device users, and pinning the module.
    const users = await findDeviceUsers('/proc', [`${deviceDir}/`]);
    expect(users.map((u) => [u.pid, u.files])).toEqual([[client.child.pid, [path]]]);
    expect(await kernel.readModule('drsample_net')).toMatchObject({ refcnt: 1 });
    await expect(kernel.unload('drsample_net')).rejects.toBeInstanceOf(ModuleBusyError);
    // Still running: it ended right after the open once (no ref'd handle kept Node alive, exit 13).
    expect(client.hasExited(), client.stderr()).toBe(false);

    client.child.kill('SIGTERM');
    expect(await client.line('closed')).toBe(`closed ${path}`);
    expect(await client.exited).toEqual({ code: 0, signal: null });
    expect(await kernel.readModule('drsample_net')).toMatchObject({ refcnt: 0 });
    await kernel.unload('drsample_net');
  });

  it('waits for the device file while the driver is not loaded, then holds it', async () => {
    const deviceDir = join(scratch.dir, 'dev');
    client = startClient(deviceDir, 'drsample_net');
    await client.line('waiting');
    await mkdir(deviceDir);
    await writeFile(join(deviceDir, 'drsample_net'), '');
    await client.line('holding');
    expect((await findDeviceUsers('/proc', [`${deviceDir}/`])).map((u) => u.pid)).toEqual([client.child.pid]);
    client.child.kill('SIGTERM');
    expect(await client.exited).toEqual({ code: 0, signal: null });
  });

  it('exits 0 on SIGTERM while still waiting for the device file', async () => {
    client = startClient(join(scratch.dir, 'dev'), 'drsample_net');
    await client.line('waiting');
    client.child.kill('SIGTERM');
    expect(await client.exited).toEqual({ code: 0, signal: null });
  });
});
