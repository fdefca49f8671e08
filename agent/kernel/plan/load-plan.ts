import { sysfsModuleName } from '../../../shared/kmod/loaded-module.ts';

/**
 * How one kind of driver is loaded beyond "modprobe every module": what the vendors' own
 * containers do (NVIDIA's gpu-driver-container `_load_driver`, k8s-driver-manager's unload list,
 * Mellanox doca-driver-build's storage-module check), as data.
 */
export interface LoadPlan {
  /** Inbox modules loaded from the host's tree before the driver (NVIDIA: i2c_core, ipmi_msghandler). */
  readonly preload: readonly string[];
  /**
   * Modules loaded only when wanted: `off` unless enabled by name; `when-loaded` only while that
   * module is loaded (nvidia_peermem needs MOFED's ib_core, else its init fails with EINVAL).
   */
  readonly optional: readonly OptionalModule[];
  /**
   * Modules of other packages that hold the driver and are unloaded with it, as the driver's own
   * (NVIDIA: nvidia_fs, gdrdrv, nvidia_vgpu_vfio, nvidia_peermem). They are not loaded again.
   */
  readonly extraHolders: readonly string[];
  /**
   * Modules that hold the driver on behalf of users (MOFED: the storage modules nvme_rdma,
   * rpcrdma, ib_iser, ib_srp...): a reload is refused naming them, unless `unloadUsers` is set.
   */
  readonly userHolders: readonly string[];
}

export interface OptionalModule {
  readonly module: string;
  readonly load: 'off' | { readonly whenLoaded: string };
}

/** A driver kind's plan; `generic` is plain modprobe of the driver's modules. */
export const LOAD_PLAN_KINDS = ['generic', 'nvidia', 'mofed'] as const;
export type LoadPlanKind = (typeof LOAD_PLAN_KINDS)[number];

const NONE: LoadPlan = { preload: [], optional: [], extraHolders: [], userHolders: [] };

/**
 * The plans, from the vendors' containers (../shared/reference/real-drivers.md §5):
 * - nvidia: `modprobe -a i2c_core ipmi_msghandler ipmi_devintf` first; nvidia-drm off (NVIDIA's
 *   container installs with --no-drm); nvidia-peermem only with MOFED loaded; the holders
 *   k8s-driver-manager unloads before nvidia.
 * - mofed: doca-driver-build's DefaultStorageModules refuse the reload unless unloaded by policy.
 */
export const LOAD_PLANS: Readonly<Record<LoadPlanKind, LoadPlan>> = {
  generic: NONE,
  nvidia: {
    preload: ['i2c_core', 'ipmi_msghandler', 'ipmi_devintf'],
    optional: [
      { module: 'nvidia_drm', load: 'off' },
      { module: 'nvidia_peermem', load: { whenLoaded: 'ib_core' } },
    ],
    extraHolders: ['nvidia_fs', 'gdrdrv', 'nvidia_vgpu_vfio', 'nvidia_peermem'],
    userHolders: [],
  },
  mofed: {
    preload: [],
    optional: [],
    extraHolders: [],
    userHolders: ['ib_iser', 'ib_isert', 'ib_srp', 'ib_srpt', 'nvme_rdma', 'nvmet_rdma', 'rpcrdma', 'xprtrdma', 'svcrdma'],
  },
};

/** What a plan means for one reload, given the driver's modules and what is loaded now. */
export interface ResolvedLoadPlan {
  /** The driver's modules to modprobe, in order (optional ones left out unless wanted). */
  readonly load: readonly string[];
  /** Inbox modules to load from the host's tree first. */
  readonly preload: readonly string[];
  /** More modules to unload with the driver when loaded (extra holders, and user holders when allowed). */
  readonly alsoUnload: readonly string[];
  /** Loaded user holders that refuse the reload (empty when `unloadUsers`). */
  readonly refusingHolders: readonly string[];
  /** Optional modules left out, with why. */
  readonly skipped: readonly string[];
}

/**
 * Pure. `modules` are the driver's modules in load order (the build's or DRIVER_MODULES);
 * `enabled` names optional modules to load anyway (`nvidia_drm` for a display or modeset user).
 */
export function resolveLoadPlan(
  plan: LoadPlan,
  modules: readonly string[],
  isLoaded: (module: string) => boolean,
  options: { readonly enabled?: readonly string[]; readonly unloadUsers?: boolean } = {},
): ResolvedLoadPlan {
  const enabled = new Set((options.enabled ?? []).map(sysfsModuleName));
  const load: string[] = [];
  const skipped: string[] = [];
  for (const module of modules.map(sysfsModuleName)) {
    const optional = plan.optional.find((o) => o.module === module);
    if (optional === undefined || enabled.has(module)) load.push(module);
    else if (optional.load === 'off') skipped.push(`${module} (optional, off unless enabled)`);
    else if (isLoaded(optional.load.whenLoaded)) load.push(module);
    else skipped.push(`${module} (only with ${optional.load.whenLoaded} loaded)`);
  }
  const loadedUsers = plan.userHolders.filter(isLoaded);
  return {
    load,
    preload: plan.preload,
    alsoUnload: [...plan.extraHolders, ...(options.unloadUsers === true ? plan.userHolders : [])],
    refusingHolders: options.unloadUsers === true ? [] : loadedUsers,
    skipped,
  };
}
