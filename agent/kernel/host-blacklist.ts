import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { renderBlacklist } from './plan/modprobe-config.ts';
import { writeConfigFile } from './write-config-file.ts';

/**
 * The one file the agent owns on the host's persistent tree: `<host modprobe.d>/
 * driver-rollout-<driver>-blacklist.conf`, the driver's competing modules (`blacklist nouveau`),
 * written once the driver is loaded and verified, so the host's modprobe (udev, at the next boot)
 * does not load them while this driver is the node's driver. It is removed when the driver is
 * uninstalled (its DaemonSet gone), never on a pod restart or an upgrade. The host's initramfs is
 * not rebuilt: a competing module that the initramfs loads is unloaded by the agent before the
 * driver loads when unused, and a used one is refused (DriverInUse, naming it and its users).
 */
export function hostBlacklistFile(dir: string, driver: string): string {
  return join(dir, `driver-rollout-${driver}-blacklist.conf`);
}

export async function writeHostBlacklist(dir: string, driver: string, modules: readonly string[]): Promise<void> {
  if (modules.length === 0) return removeHostBlacklist(dir, driver);
  await writeConfigFile(hostBlacklistFile(dir, driver), renderBlacklist(modules));
}

export async function removeHostBlacklist(dir: string, driver: string): Promise<void> {
  await rm(hostBlacklistFile(dir, driver), { force: true });
}
