import type { PciDevice } from '../detect/pci-device.ts';

/** A PF whose SR-IOV VFs are removed (`sriov_numvfs` → 0) before the unload and re-created after the load. */
export interface VirtualFunctionsToRemove {
  readonly physicalFunction: string;
  readonly numVfs: number;
  /** The VFs' addresses now (they come back at the same addresses). */
  readonly virtualFunctions: readonly string[];
}

/** A function unbound from `driver` before the unload and bound to it again after the load. */
export interface BindingToRemove {
  readonly address: string;
  readonly driver: string;
}

export interface DeviceTeardownPlan {
  /** Unbound first (VFs before their PF is touched), in address order. */
  readonly unbind: readonly BindingToRemove[];
  readonly removeVirtualFunctions: readonly VirtualFunctionsToRemove[];
}

export interface DeviceTeardownSettings {
  /** Remove the VFs of the PFs the driver serves (the PF driver cannot go while they exist). */
  readonly removeVirtualFunctions: boolean;
  /** Drivers (e.g. `vfio-pci`) whose bindings to the driver's functions and their VFs are removed and restored. */
  readonly unbindDrivers: readonly string[];
}

/**
 * Pure: what holds the driver at the device level, from the PFs it serves (`served`) and every
 * PCI function (`functions`, for the VFs' bindings): the VFs of each served PF with VFs enabled,
 * and every served PF or VF of one bound to a driver of `unbindDrivers`.
 */
export function planDeviceTeardown(served: readonly PciDevice[], functions: readonly PciDevice[], settings: DeviceTeardownSettings): DeviceTeardownPlan {
  const byAddress = new Map(functions.map((f) => [f.address, f]));
  const unbindable = new Set(settings.unbindDrivers);
  const unbind: BindingToRemove[] = [];
  const removeVirtualFunctions: VirtualFunctionsToRemove[] = [];
  for (const pf of [...served].sort((a, b) => a.address.localeCompare(b.address))) {
    const vfs = pf.sriov?.numVfs === undefined || pf.sriov.numVfs === 0 ? [] : pf.sriov.virtualFunctions;
    for (const address of vfs) {
      const driver = byAddress.get(address)?.driver;
      if (driver !== undefined && unbindable.has(driver)) unbind.push({ address, driver });
    }
    if (pf.driver !== undefined && unbindable.has(pf.driver)) unbind.push({ address: pf.address, driver: pf.driver });
    if (settings.removeVirtualFunctions && pf.sriov !== undefined && pf.sriov.numVfs > 0) {
      removeVirtualFunctions.push({ physicalFunction: pf.address, numVfs: pf.sriov.numVfs, virtualFunctions: pf.sriov.virtualFunctions });
    }
  }
  return { unbind, removeVirtualFunctions };
}

/** Pure: the VFs the plan removes or unbinds, each with its PF: what must not be in use. */
export function virtualFunctionsTouched(plan: DeviceTeardownPlan): { readonly address: string; readonly physicalFunction: string }[] {
  const out = new Map<string, string>();
  for (const r of plan.removeVirtualFunctions) for (const vf of r.virtualFunctions) out.set(vf, r.physicalFunction);
  return [...out].map(([address, physicalFunction]) => ({ address, physicalFunction })).sort((a, b) => a.address.localeCompare(b.address));
}

/** Pure: nothing to do. */
export function isEmptyTeardown(plan: DeviceTeardownPlan): boolean {
  return plan.unbind.length === 0 && plan.removeVirtualFunctions.length === 0;
}
