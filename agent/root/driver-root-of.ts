import { join } from 'node:path';
import type { Logger } from '../../shared/logger.ts';
import type { AgentConfig } from '../config/agent-config.ts';
import { createDriverRoot, type DriverRoot } from './driver-root.ts';

/** The driver root of the image, when it has one (DRIVER_ROOT_DIR); its copies live beside the module cache. */
export function driverRootOf(config: AgentConfig, log: Logger): DriverRoot | undefined {
  if (config.driverRootDir === undefined) return undefined;
  return createDriverRoot({
    imageDir: config.driverRootDir,
    path: config.driverRootPath,
    storeDir: join(config.cacheDir, 'driver-root', config.driver),
    readyMarker: config.driverReadyMarker,
    check: config.driverRootCheck,
    sysModuleDir: join(config.sysfsRoot, 'module'),
    log: log.child({ task: 'driver-root' }),
  });
}
