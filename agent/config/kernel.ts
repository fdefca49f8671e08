import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';
import { DEVICE_KINDS, deviceKindForDriver } from '../../shared/device-kind.ts';
import { DEFAULT_LOAD_PLAN, parseModuleParameters } from '../../shared/driver-identity.ts';
import { DEVICE_KIND_SELECTORS, normalizeHexId, type DeviceSelector } from '../detect/device-selector.ts';
import { LOAD_PLAN_KINDS, type LoadPlanKind } from '../kernel/plan/load-plan.ts';
import { absolutePathList, optional, problem, splitList } from './flag-fields.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/** Which devices are served, which modules are loaded with which parameters, and how. */
export interface KernelConfig {
  /** Modules to load with modprobe (dependencies come along); empty = every module built. */
  readonly modules: readonly string[];
  /** Module parameters, written as modprobe.d `options` lines: module → parameter → value. */
  readonly moduleParameters: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * A mounted ConfigMap of `<module>.conf` files (agent/kernel/module-config.ts): more parameters,
   * read at every load, over `moduleParameters`; checked against `moduleConfigSha256` when set.
   */
  readonly moduleConfigDir: string | undefined;
  /** The checksum of the module config the pod template was made with: part of the driver identity. */
  readonly moduleConfigSha256: string | undefined;
  /** Inbox modules that compete with the driver (e.g. `nouveau`), blacklisted during the reload. */
  readonly blacklist: readonly string[];
  /**
   * The host's modprobe.d (as mounted): while this driver is the node's loaded driver the
   * blacklist also lives there (`driver-rollout-<driver>-blacklist.conf`), so a reboot does not
   * load the competing modules; removed when the driver is uninstalled (agent/kernel/host-blacklist.ts).
   */
  readonly hostBlacklistDir: string | undefined;
  readonly deviceSelector: DeviceSelector;
  /** `/sys` on a node; a fixture tree in tests. `<sysfsRoot>/module` is where loaded modules show. */
  readonly sysfsRoot: string;
  /**
   * The driver's own module tree: modules go to `<moduleRoot>/lib/modules/<kver>/updates/<driver>/`
   * and depmod -b runs there only. Never the host's tree (refused): modules installed there
   * autoload after a reboot, before the driver pod and its safe-load gate run.
   */
  readonly moduleRoot: string;
  /** The host's module tree (mounted read-only): inbox dependencies and preloads come from it. */
  readonly hostModuleRoot: string;
  /** The driver kind's load plan (agent/kernel/plan/load-plan.ts): preloads, optional modules, extra holders. */
  readonly loadPlan: LoadPlanKind;
  /** Optional modules of the plan to load anyway (e.g. `nvidia_drm`). */
  readonly loadOptional: readonly string[];
  /** Let the agent unload the plan's user holders (MOFED's storage modules) instead of refusing. */
  readonly unloadUserHolders: boolean;
  /**
   * Modules never to unload (`--never-unload`, KMM's policy for modules that cannot be unloaded
   * safely): a reload that would unload one is refused with reason RebootRequired, nothing changed.
   */
  readonly neverUnload: readonly string[];
  /** Firmware shipped in the image, copied to `firmwareHostDir` (both unset: the host must have it). */
  readonly firmwareDir: string | undefined;
  /** A host directory the driver owns, mounted at the same path; firmware_class.path points there. */
  readonly firmwareHostDir: string | undefined;
  /** The host's firmware roots as mounted in the container (the kernel's own search list is built from them). */
  readonly hostFirmwareRoots: readonly string[];
  /**
   * `simulated` models the kernel in memory (tests and the demo); only the test entry point
   * test/doubles/simulated-agent-main.ts provides it, agent/main.ts refuses it.
   */
  readonly kernelAdapter: 'real' | 'simulated';
  readonly unloadOnStop: boolean;
  /**
   * Where the modprobe.d files (options, and the blacklist while a reload runs) are written. The
   * default, /run/modprobe.d, is read by modprobe without `-C`, in the container and, through the
   * host-path mount, by the host's own modprobe (udev). The blacklist file is removed when the
   * reload ends, so it keeps nouveau away only during the reload, not after it or after a reboot.
   */
  readonly modprobeConfigDir: string;
  /**
   * Device files of the driver (`/dev/nvidia`, `/dev/infiniband/`): when set, a "driver is in use"
   * refusal names the processes (and pods) holding them, found in `procDir` (the host's /proc:
   * the pod needs hostPID). Empty: the refusal names the modules and counts only.
   */
  readonly deviceFilePrefixes: readonly string[];
  readonly procDir: string;
}

const moduleName = /^[A-Za-z0-9_-]+$/;

export const kernelFlags = {
  modules: optional,
  'module-parameters': optional,
  'module-config-dir': optional,
  'module-config-sha256': z.string().regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 in hex (64 digits)').optional(),
  blacklist: optional,
  'host-blacklist-dir': optional,
  'device-kind': z.enum(DEVICE_KINDS).optional(),
  'device-vendors': optional,
  'device-classes': optional,
  'sysfs-root': z.string().default('/sys'),
  'module-root': z.string().default('/var/lib/driver-rollout/root'),
  'host-module-root': z.string().default('/'),
  'load-plan': z.enum(LOAD_PLAN_KINDS).default(DEFAULT_LOAD_PLAN),
  'load-optional': optional,
  'unload-user-holders': z.stringbool().default(false),
  'never-unload': optional,
  'firmware-dir': optional,
  'firmware-host-dir': optional,
  'host-firmware-roots': z.string().default('/lib/firmware'),
  kernel: z.enum(['real', 'simulated']).default('real'),
  'unload-on-stop': z.stringbool().default(false),
  'modprobe-config-dir': z.string().default('/run/modprobe.d'),
  'device-file-prefixes': optional,
  'proc-dir': z.string().default('/proc'),
};

export function kernelConfig(c: RawAgentConfig, problems: ConfigProblem[]): KernelConfig {
  if (c['module-root'].replace(/\/+$/, '') === c['host-module-root'].replace(/\/+$/, '')) {
    problems.push(problem('module-root', `is the host's module tree (${c['host-module-root']}): modules installed there autoload after a reboot; use a root the driver owns`));
  }
  return {
    modules: moduleList(c, 'modules', problems),
    moduleParameters: moduleParameters(c['module-parameters'], problems),
    moduleConfigDir: c['module-config-dir'],
    moduleConfigSha256: c['module-config-sha256'],
    blacklist: moduleList(c, 'blacklist', problems),
    hostBlacklistDir: c['host-blacklist-dir'],
    deviceSelector: deviceSelector(c, problems),
    sysfsRoot: c['sysfs-root'],
    moduleRoot: c['module-root'],
    hostModuleRoot: c['host-module-root'],
    loadPlan: c['load-plan'],
    loadOptional: moduleList(c, 'load-optional', problems),
    unloadUserHolders: c['unload-user-holders'],
    neverUnload: moduleList(c, 'never-unload', problems),
    firmwareDir: c['firmware-dir'],
    firmwareHostDir: c['firmware-host-dir'],
    hostFirmwareRoots: absolutePathList(c['host-firmware-roots'], 'host-firmware-roots', problems),
    kernelAdapter: c.kernel,
    unloadOnStop: c['unload-on-stop'],
    modprobeConfigDir: c['modprobe-config-dir'],
    deviceFilePrefixes: absolutePathList(c['device-file-prefixes'], 'device-file-prefixes', problems),
    procDir: c['proc-dir'],
  };
}

function moduleList(c: RawAgentConfig, field: 'modules' | 'blacklist' | 'load-optional' | 'never-unload', problems: ConfigProblem[]): string[] {
  const names = splitList(c[field] ?? '');
  const bad = names.filter((n) => !moduleName.test(n));
  if (bad.length > 0) problems.push(problem(field, `not module names: ${bad.join(', ')}`));
  return names;
}

/** `module.param=value` items separated by spaces or commas, e.g. `nvidia.NVreg_OpenRmEnableUnsupportedGpus=1`. */
function moduleParameters(text: string | undefined, problems: ConfigProblem[]): Record<string, Record<string, string>> {
  const { parameters, bad } = parseModuleParameters(text ?? '');
  for (const item of bad) problems.push(problem('module-parameters', `"${item}" is not module.parameter=value`));
  return parameters;
}

/**
 * Explicit vendors and classes win; else `--device-kind`; else the kind the driver name
 * implies (`gpu` → NVIDIA GPUs, `ofed` → Mellanox NICs).
 */
function deviceSelector(c: RawAgentConfig, problems: ConfigProblem[]): DeviceSelector {
  const kind = c['device-kind'] ?? deviceKindForDriver(c['driver-name']);
  const base = kind === undefined ? undefined : DEVICE_KIND_SELECTORS[kind];
  const vendors = hexList(c, 'device-vendors', 4, problems) ?? base?.vendors;
  const classPrefixes = hexList(c, 'device-classes', 4, problems) ?? base?.classPrefixes;
  if ((vendors === undefined || classPrefixes === undefined) && c['driver-name'] !== '') {
    problems.push(
      problem('device-kind', `cannot tell which devices driver "${c['driver-name']}" serves: set gpu or nic, or --device-vendors and --device-classes`),
    );
  }
  return { vendors: vendors ?? [], classPrefixes: classPrefixes ?? [] };
}

/** Vendors are 4 hex digits; classes are class+subclass (4 digits, `0302`) matched as a prefix. */
function hexList(c: RawAgentConfig, field: 'device-vendors' | 'device-classes', digits: number, problems: ConfigProblem[]): string[] | undefined {
  const text = c[field];
  if (text === undefined) return undefined;
  const items = splitList(text);
  const ids = items.map((i) => normalizeHexId(i, digits));
  const bad = items.filter((_, n) => ids[n] === undefined);
  if (bad.length > 0) problems.push(problem(field, `not ${digits}-digit hex ids: ${bad.join(', ')}`));
  return ids.filter((id): id is string => id !== undefined);
}
