import { writeFile } from 'node:fs/promises';
import type { KernelPort, ModuleTree } from '../../../agent/kernel/kernel-port.ts';

/**
 * Where a reload stops for good, counted in the modprobe calls of the driver's own tree (the
 * load proper: the host tree's preloads come before the unload and are not counted):
 * `before` 1 is right after the old modules were unloaded, `before` 2 between the first and the
 * second modprobe, `after` N once the N-th returned (loaded, not yet verified nor reported).
 */
export interface PausePoint {
  readonly when: 'before' | 'after';
  readonly modprobe: number;
}

/**
 * A test-side wrapper around the agent's real kernel adapter (KernelPort): it passes every call
 * through and, at `pause`, writes `markerFile` (JSON: the point and this process's pid) and never
 * returns, so the process can be killed exactly there. Nothing of it is in the agent.
 */
export function pausingKernel(kernel: KernelPort, driverRoot: string, pause: PausePoint, markerFile: string): KernelPort {
  let modprobes = 0;
  const isDriverTree = (tree: ModuleTree): boolean => tree.root.replace(/\/+$/, '') === driverRoot.replace(/\/+$/, '');
  const stopHere = async (): Promise<never> => {
    await writeFile(markerFile, JSON.stringify({ ...pause, pid: process.pid }));
    // A timer keeps the process alive; it is killed (SIGKILL) while waiting here.
    return new Promise<never>(() => setInterval(() => undefined, 60_000));
  };
  return {
    readModule: (name) => kernel.readModule(name),
    listLoaded: () => kernel.listLoaded(),
    installModules: (tree, subdir, modules) => kernel.installModules(tree, subdir, modules),
    resolveLoadOrder: (tree, modules) => kernel.resolveLoadOrder(tree, modules),
    unload: (module) => kernel.unload(module),
    async load(tree, module) {
      if (!isDriverTree(tree)) return kernel.load(tree, module);
      modprobes++;
      if (pause.when === 'before' && pause.modprobe === modprobes) await stopHere();
      await kernel.load(tree, module);
      if (pause.when === 'after' && pause.modprobe === modprobes) await stopHere();
    },
  };
}
