import type { SimulatedKernel } from '../../doubles/simulated-kernel.ts';
import type { ScenarioWorld } from '../guest/scenario.ts';

/**
 * The scenario world of the simulated kernel (agent/kernel/simulated-kernel.ts), on the host:
 * a workload holding a device is an open reference on the module behind it; there is no kernel
 * log. Used to check that the simulated kernel does what the real one does.
 */
export function simulatedWorld(kernel: SimulatedKernel, sysModuleDir: string, moduleOfDevice: (device: string) => string): ScenarioWorld {
  const open: { close(): Promise<void> }[] = [];
  return {
    kernel,
    sysModuleDir,
    async holdDevice(device) {
      open.push(await kernel.openDevice(moduleOfDevice(device)));
      return undefined;
    },
    async releaseDevices() {
      for (const handle of open.splice(0)) await handle.close();
    },
    async openDevice(device) {
      try {
        await (await kernel.openDevice(moduleOfDevice(device))).close();
        return undefined;
      } catch (error) {
        // The simulated kernel names the errno in its message, e.g. "... (ENOENT)".
        return /\((E[A-Z]+)\)/.exec(String(error))?.[1] ?? String(error);
      }
    },
    clearKernelLog: () => Promise.resolve(),
    readKernelLog: () => Promise.resolve([]),
  };
}
