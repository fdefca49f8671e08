import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../init-container/clock.ts';
import { ModulesInUseError, StopRequested } from '../../../init-container/errors.ts';
import { findModulesToReplaceInUse, waitUntilModulesUnused } from '../../../init-container/preflight.ts';
import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';
import { captureLogger } from './capture-logger.ts';

const FIXTURES = resolve(import.meta.dirname, '../../fixtures/sys-module');
const reader = (root: string) => (name: string) => readLoadedModule(join(FIXTURES, root), name);

describe('findModulesToReplaceInUse on fixture /sys/module trees', () => {
  it.each([
    { tree: 'userspace-user', modules: ['nvidia_uvm', 'nvidia'], inUse: [{ module: 'nvidia', refcnt: 2, holders: ['nvidia_uvm'], outsideUsers: 1 }] },
    { tree: 'kernel-holders-only', modules: ['nvidia_uvm', 'nvidia'], inUse: [] },
    { tree: 'userspace-user', modules: ['nvidia_uvm'], inUse: [] },
    // Not loaded (absent) or built in (no refcnt): nothing to replace, nothing in use.
    { tree: 'userspace-user', modules: ['mlx5_core'], inUse: [] },
    { tree: 'kernel-holders-only', modules: ['loop'], inUse: [] },
    // "-" in a module name is "_" in sysfs.
    { tree: 'userspace-user', modules: ['nvidia-uvm', 'nvidia'], inUse: [{ module: 'nvidia', refcnt: 2 }] },
  ])('$tree, modules $modules → $inUse.length in use', async ({ tree, modules, inUse }) => {
    const found = await findModulesToReplaceInUse(reader(tree), modules);
    expect(found).toHaveLength(inUse.length);
    inUse.forEach((u, i) => {
      expect(found[i]).toMatchObject(u);
    });
  });
});

describe('waitUntilModulesUnused (pre-flight)', () => {
  const scratch: string[] = [];
  afterEach(async () => {
    for (const dir of scratch.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  it('passes at once when no module to be replaced has a user outside the kernel', async () => {
    const { logger, lines } = captureLogger();
    await waitUntilModulesUnused({ readModule: reader('kernel-holders-only'), modules: ['nvidia_uvm', 'nvidia'], signal: new AbortController().signal, clock: systemClock, logger });
    expect(lines.at(-1)?.msg).toMatch(/pre-flight passed/);
  });

  it('refuses, naming module, refcnt and holders, while a userspace user remains until the timeout', async () => {
    const { logger, lines } = captureLogger();
    const error: unknown = await waitUntilModulesUnused({
      readModule: reader('userspace-user'),
      modules: ['nvidia_uvm', 'nvidia'],
      signal: AbortSignal.any([AbortSignal.timeout(60)]),
      clock: systemClock,
      logger,
      recheckMs: 10,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModulesInUseError);
    expect((error as Error).message).toBe('driver is in use: nvidia (refcnt 2, holders [nvidia_uvm], 1 user(s) outside the kernel)');
    // Logged once (users unchanged), not on every re-check.
    const warnings = lines.filter((l) => l.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain('nvidia (refcnt 2, holders [nvidia_uvm]');
  });

  it('keeps re-checking and passes once the last user goes', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sys-module-'));
    scratch.push(root);
    await cp(join(FIXTURES, 'userspace-user'), root, { recursive: true, verbatimSymlinks: true });
    const { logger, lines } = captureLogger();
    const stop = new AbortController();
    const done = waitUntilModulesUnused({
      readModule: (name) => readLoadedModule(root, name),
      modules: ['nvidia'],
      signal: stop.signal,
      clock: systemClock,
      logger,
      recheckMs: 10,
    });
    await new Promise((r) => setTimeout(r, 40));
    // nvidia-persistenced closes /dev/nvidia0.
    await writeFile(join(root, 'nvidia', 'refcnt'), '1\n');
    await done;
    expect(lines.map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('on SIGTERM while in use, throws the in-use error with the stop request as cause', async () => {
    const { logger } = captureLogger();
    const stop = new AbortController();
    setTimeout(() => { stop.abort(new StopRequested('signal', 'received SIGTERM')); }, 20);
    const error: unknown = await waitUntilModulesUnused({ readModule: reader('userspace-user'), modules: ['nvidia'], signal: stop.signal, clock: systemClock, logger, recheckMs: 1000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModulesInUseError);
    expect((error as Error).cause).toBeInstanceOf(StopRequested);
  });
});
