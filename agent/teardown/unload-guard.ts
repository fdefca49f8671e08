import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { PciDevice } from '../detect/pci-device.ts';
import { readPciDevices } from '../detect/read-pci-devices.ts';
import { bindFunction, findVirtualFunctionUsers, restoreVirtualFunctions, setVirtualFunctionCount, unbindFunction } from './device-teardown.ts';
import type { HolderCommand } from './holder-command.ts';
import { isEmptyTeardown, planDeviceTeardown, virtualFunctionsTouched, type DeviceTeardownSettings } from './plan-device-teardown.ts';
import { runHolderCommand } from './run-holder-command.ts';
import { VirtualFunctionsInUseError } from './teardown-errors.ts';
import { readTeardownRecord, removeTeardownRecord, writeTeardownRecord, type TeardownRecord } from './teardown-record.ts';

export interface UnloadGuardOptions {
  readonly driver: string;
  readonly sysfsRoot: string;
  /** The host's /proc (hostPID) and VFIO device directory: who holds a VF. */
  readonly procDir: string;
  readonly vfioDir: string;
  /** On a host path: survives the pod, so a new agent finishes a restore. */
  readonly recordPath: string;
  /** Stopped in order before the unload, started in reverse after the load. */
  readonly holders: readonly HolderCommand[];
  /** Prefix of a holder's command `on: host` (nsenter into the host's namespaces). */
  readonly hostPrefix: readonly string[];
  readonly devices: DeviceTeardownSettings;
  readonly now: () => Date;
  readonly log: Logger;
}

/** What the reload calls around the unload (agent/kernel/reload-driver.ts). */
export interface UnloadGuard {
  /**
   * Before the unload: refuses (VirtualFunctionsInUseError, nothing changed) when a VF to remove
   * is open; else records, then stops the holders, unbinds, removes the VFs. A failure midway
   * puts back what was taken down, then throws.
   */
  takeDown(served: readonly PciDevice[]): Promise<void>;
  /** After the load: puts back what the record lists (VFs, bindings, then holders) and removes it. False: no record. */
  restore(): Promise<boolean>;
}

export function createUnloadGuard(options: UnloadGuardOptions): UnloadGuard {
  const { log } = options;
  const guard: UnloadGuard = {
    async takeDown(served) {
      const functions = options.devices.removeVirtualFunctions || options.devices.unbindDrivers.length > 0 ? await readPciDevices(options.sysfsRoot) : [];
      const plan = planDeviceTeardown(served, functions, options.devices);
      const inUse = await findVirtualFunctionUsers(options.sysfsRoot, virtualFunctionsTouched(plan), options);
      if (inUse.length > 0) throw new VirtualFunctionsInUseError(options.driver, inUse);
      const running: HolderCommand[] = [];
      for (const holder of options.holders) if (holder.check === undefined || (await runHolderCommand(holder, 'check', options.hostPrefix))) running.push(holder);
      if (running.length === 0 && isEmptyTeardown(plan)) return;

      const earlier = await readTeardownRecord(options.recordPath);
      const record: TeardownRecord = {
        driver: options.driver,
        holders: union(earlier?.holders ?? [], running.map((h) => h.name)),
        removedVirtualFunctions: [...(earlier?.removedVirtualFunctions ?? []), ...plan.removeVirtualFunctions.filter((r) => !earlier?.removedVirtualFunctions.some((e) => e.physicalFunction === r.physicalFunction))],
        removedBindings: [...(earlier?.removedBindings ?? []), ...plan.unbind.filter((b) => !earlier?.removedBindings.some((e) => e.address === b.address))],
        recordedAt: options.now().toISOString(),
      };
      await writeTeardownRecord(options.recordPath, record);
      log.info({ holders: record.holders, virtualFunctions: plan.removeVirtualFunctions, unbind: plan.unbind, record: options.recordPath }, 'taking down what holds the driver before the unload');
      try {
        for (const holder of running) await runHolderCommand(holder, 'stop', options.hostPrefix);
        for (const binding of plan.unbind) await unbindFunction(options.sysfsRoot, binding);
        for (const removed of plan.removeVirtualFunctions) await setVirtualFunctionCount(options.sysfsRoot, removed.physicalFunction, 0);
      } catch (error) {
        await guard.restore().catch((restoreError: unknown) => {
          log.error({ err: toError(restoreError), record: options.recordPath }, 'cannot put back what was taken down; the record stays for the next attempt');
        });
        throw error;
      }
    },

    async restore() {
      const record = await readTeardownRecord(options.recordPath);
      if (record === undefined) return false;
      for (const removed of record.removedVirtualFunctions) await restoreVirtualFunctions(options.sysfsRoot, removed);
      for (const binding of record.removedBindings) await bindFunction(options.sysfsRoot, binding);
      const byName = new Map(options.holders.map((h) => [h.name, h]));
      for (const name of [...record.holders].reverse()) {
        const holder = byName.get(name);
        if (holder === undefined) {
          log.warn({ holder: name }, 'a holder the record lists is no longer configured: not started');
          continue;
        }
        await runHolderCommand(holder, 'start', options.hostPrefix);
      }
      await removeTeardownRecord(options.recordPath);
      log.info({ holders: record.holders, virtualFunctions: record.removedVirtualFunctions, bindings: record.removedBindings }, 'restored what was taken down before the unload');
      return true;
    },
  };
  return guard;
}

function union(a: readonly string[], b: readonly string[]): string[] {
  return [...new Set([...a, ...b])];
}
