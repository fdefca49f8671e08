import { join } from 'node:path';
import type { SimulatedKernelFactory } from '../../agent/assemble-agent.ts';
import { SimulatedKernel } from './simulated-kernel.ts';
import type { SimulatedKernelSettings } from './simulated-kernel-settings.ts';

/**
 * `--kernel simulated`: a SimulatedKernel over `<sysfs>/module`, configured by the
 * `--simulated-*` settings (simulated-kernel-settings.ts). Its memory lives beside that tree, so
 * it outlives one agent like a real kernel does. Wired by simulated-agent-main.ts and the unit
 * tests, never by agent/main.ts.
 */
export function simulatedKernelFactory(settings: SimulatedKernelSettings): SimulatedKernelFactory {
  return async (config, hostInfo, log) => {
    const sysModuleDir = join(config.sysfsRoot, 'module');
    const runningKernelVersion = settings.kernelRelease ?? config.kernelVersion ?? (await hostInfo.readHostInfo()).kernelRelease;
    const stateFile = join(config.sysfsRoot, '.simulated-kernel.json');
    const deviceDir = settings.deviceDir;
    const kernel = new SimulatedKernel({
      sysModuleDir,
      runningKernelVersion,
      loadDurationMs: () => settings.loadMs,
      stateFile,
      ...(deviceDir === undefined ? {} : { deviceDir, procDir: config.procDir }),
    });
    for (const [module, errnoText] of Object.entries(settings.initFailures)) kernel.failInit(module, errnoText);
    log.warn({ runningKernelVersion, sysModuleDir }, 'using the SIMULATED kernel: no real module is loaded');
    return kernel;
  };
}
