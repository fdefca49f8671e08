import { join } from 'node:path';
import type { Logger } from '../shared/logger.ts';
import { buildDriver } from './build/build-driver.ts';
import type { BuiltDriver } from './build/built-driver.ts';
import type { AgentConfig } from './config/agent-config.ts';
import { driverIdentityOf } from './config/driver-identity-of.ts';
import { driverFingerprint, renderLoadedDriver } from '../shared/driver-identity.ts';
import { detectNode } from './detect/detect-node.ts';
import type { HostInfoPort } from './detect/host-info.ts';
import { decideReload } from './kernel/plan/decide-reload.ts';
import { sysfsModuleName } from '../shared/kmod/loaded-module.ts';
import { DriverVerificationError } from './kernel/kernel-errors.ts';
import type { KernelPort, ModuleTree } from './kernel/kernel-port.ts';
import { restoreFirmwarePath, type FirmwareOptions } from './kernel/driver-firmware.ts';
import { LOAD_PLANS } from './kernel/plan/load-plan.ts';
import { reloadDriver } from './kernel/reload-driver.ts';
import { readModuleSignature, readSignaturePolicy, readSignaturesFor } from './kernel/read-signature-policy.ts';
import { signatureVerdict, type SignaturePolicy } from './kernel/plan/module-signature-trust.ts';
import type { SignatureVerdict } from '../shared/module-signature-verdict.ts';
import { writeHostBlacklist } from './kernel/host-blacklist.ts';
import { mergeModuleParameters } from './kernel/plan/module-config.ts';
import type { ModuleParameters } from './kernel/plan/modprobe-config.ts';
import { readModuleConfig } from './kernel/read-module-config.ts';
import { readLoadedModules, unloadDriver, type DeviceUserLookup } from './kernel/unload-driver.ts';
import type { AgentSteps } from './run-agent.ts';
import { createUnloadGuard } from './teardown/unload-guard.ts';
import type { DriverRoot } from './root/driver-root.ts';
import type { NodeDetection } from './detect/detect-node.ts';
import { servesNvidiaGpus } from './detect/device-selector.ts';
import { checkUserSpace, readModuleFileVersions } from './user-space/check-user-space.ts';
import { createGpuDaemons, type GpuDaemons } from './daemons/gpu-daemons.ts';
import type { BackoffPolicy } from '../shared/backoff.ts';

/** Restarts of a daemon that ended: from 1 s, doubling, up to 60 s (20 % jitter). */
const DAEMON_RESTART: BackoffPolicy = { initialMs: 1000, maxMs: 60_000, jitter: 0.2, jitterMode: 'shorten' };
const DAEMON_POLL_MS = 2000;
const DAEMON_STOP_TIMEOUT_MS = 10_000;

/**
 * The driver's build for one kernel as configured. The agent's own build and the next-kernel
 * preflight both go through here, so a kernel built ahead of a reboot has the cache key the
 * agent looks up after it (`background` changes the priority only, not the key).
 */
export function buildDriverFor(
  config: AgentConfig,
  kernelRelease: string,
  run: { readonly log: Logger; readonly signal: AbortSignal; readonly background?: boolean },
): Promise<BuiltDriver> {
  return buildDriver({
    driver: config.driver,
    version: config.driverVersion,
    kernelVersion: kernelRelease,
    source: config.source,
    cacheDir: config.cacheDir,
    recipe: config.recipe,
    ...(config.prebuiltDir === undefined ? {} : { prebuiltDir: config.prebuiltDir }),
    dependencySymvers: Object.fromEntries(config.dependencySymvers.map((path) => [path, path])),
    signing: config.signing,
    ...(config.headersDirs === undefined ? {} : { headersDirs: config.headersDirs.map((d) => d.replaceAll('{kernel}', kernelRelease)) }),
    ...(run.background === true ? { background: true } : {}),
    logger: run.log,
    signal: run.signal,
  });
}

/**
 * The verdict of an installed, not running kernel on the driver built for it (the next-kernel
 * preflight). Its policy is taken to be the running kernel's: the same firmware (Secure Boot),
 * the same boot command line (module.sig_enforce, lockdown) and the same machine and platform
 * keys (MOK, db). Not seen: keys built into that kernel only, a CONFIG_MODULE_SIG_FORCE of its
 * own, and a key pending enrollment (mokutil --import) until the reboot that enrolls it.
 * `policy`: that policy as already read.
 */
export async function judgeNextKernelSignatures(config: AgentConfig, built: BuiltDriver, policy?: SignaturePolicy): Promise<SignatureVerdict> {
  const expected = policy ?? (await readSignaturePolicy({ procDir: config.procDir }));
  return signatureVerdict(expected, await readSignaturesFor(expected, built.modules), { fingerprint: driverFingerprint(driverIdentityOf(config)), kernel: built.kernelVersion });
}

/**
 * Hands the module-signature verdict to what writes it on the node (shared/module-signature-verdict.ts),
 * without waiting: a slow or failing API server never delays the load, and the reload refuses
 * untrusted modules itself.
 */
export type PublishSignatureVerdict = (verdict: SignatureVerdict) => void;

/** What the agent's assembly hands the steps beside its ports. */
export interface AgentStepsOptions {
  /** The driver root the image carries (DRIVER_ROOT_DIR), published for a verified driver. */
  readonly root?: DriverRoot | undefined;
  /** Where each load's module-signature verdict goes. */
  readonly publishVerdict?: PublishSignatureVerdict;
}

/**
 * The flow's steps over detection, buildDriver and reloadDriver. Every load first judges the
 * build's signatures under the running kernel's policy and publishes that verdict
 * (`publishVerdict`), before anything is unloaded, the fast path included. With a driver root
 * (DRIVER_ROOT_DIR) of a driver serving NVIDIA's GPUs, the version guard compares its user space
 * with the modules before every load, and its daemons run beside a verified driver and stop before
 * an unload; with any driver root (given as `root`), a verified driver publishes it, an unload
 * withdraws its ready marker first and releases it after.
 */
export function createAgentSteps(config: AgentConfig, kernel: KernelPort, hostInfo: HostInfoPort, log: Logger, options: AgentStepsOptions = {}): AgentSteps {
  const { root, publishVerdict } = options;
  const tree = (built: BuiltDriver): ModuleTree => ({ root: config.moduleRoot, kernelVersion: built.kernelVersion, configDir: config.modprobeConfigDir });
  const hostTree = (built: BuiltDriver): ModuleTree => ({ root: config.hostModuleRoot, kernelVersion: built.kernelVersion, configDir: config.modprobeConfigDir });
  const firmware: FirmwareOptions = { sourceDir: config.firmwareDir, hostDir: config.firmwareHostDir, hostRoots: config.hostFirmwareRoots };
  // The firmware_class path before this agent pointed it at the driver's firmware: put back when the driver is unloaded on stop.
  let firmwarePathBefore: string | undefined;
  // What the last load asked modprobe for, after the load plan: what verify expects loaded.
  let requested: readonly string[] | undefined;
  const toLoad = (built: BuiltDriver) => (config.modules.length > 0 ? config.modules : built.modules.map((m) => m.name));
  let lastBuilt: BuiltDriver | undefined;
  // MODULE_PARAMETERS with the module config files over them, as read for the last load.
  let parameters: ModuleParameters = config.moduleParameters;
  let lastDetection: NodeDetection | undefined;
  const guard = createUnloadGuard({
    driver: config.driver,
    sysfsRoot: config.sysfsRoot,
    procDir: config.procDir,
    vfioDir: config.vfioDir,
    // Beside the module cache and the last-good record: a host path that outlives the pod.
    recordPath: join(config.cacheDir, 'teardown', `${config.driver}.json`),
    holders: config.holders,
    hostPrefix: config.hostCommandPrefix,
    devices: { removeVirtualFunctions: config.sriovTeardown, unbindDrivers: config.unbindDrivers },
    now: () => new Date(),
    log,
  });
  // Names the processes behind a "driver is in use" refusal when the device files are known.
  // What a verified load publishes on the node (the coordinator's restart-only path reads it).
  const fingerprint = driverFingerprint(driverIdentityOf(config));
  const loadedDriver = renderLoadedDriver({ pod: `${config.podNamespace}/${config.podName}`, fingerprint });
  const deviceUsers: DeviceUserLookup | undefined =
    config.deviceFilePrefixes.length === 0 ? undefined : { devicePrefixes: config.deviceFilePrefixes, procDir: config.procDir };
  // NVIDIA's user space in the driver root, which the guard checks and the daemons run from: a GPU driver's root only.
  const nvidiaRoot = config.driverRootDir !== undefined && servesNvidiaGpus(config.deviceSelector) ? config.driverRootDir : undefined;
  const daemons: GpuDaemons | undefined =
    nvidiaRoot === undefined
      ? undefined
      : createGpuDaemons({ root: nvidiaRoot, sysfsRoot: config.sysfsRoot, runDir: config.daemonRunDir, restart: DAEMON_RESTART, pollMs: DAEMON_POLL_MS, stopTimeoutMs: DAEMON_STOP_TIMEOUT_MS, random: Math.random, log });

  return {
    detect: () =>
      detectNode({ sysfsRoot: config.sysfsRoot, selector: config.deviceSelector, hostInfo, kernelReleaseOverride: config.kernelVersion }),

    async build(detection, signal) {
      lastDetection = detection;
      lastBuilt = await buildDriverFor(config, detection.host.kernelRelease, { log, signal });
      return lastBuilt;
    },

    async load(built) {
      const signaturePolicy = await readSignaturePolicy({ procDir: config.procDir });
      const signatures = await readSignaturesFor(signaturePolicy, built.modules);
      publishVerdict?.(signatureVerdict(signaturePolicy, signatures, { fingerprint, kernel: built.kernelVersion }));
      // The version guard: before anything is unloaded, the fast path included (a mismatched image is never Ready).
      if (nvidiaRoot !== undefined) await checkUserSpace(config.driver, nvidiaRoot, await readModuleFileVersions(built.modules));
      if (config.moduleConfigDir !== undefined) {
        const fromFiles = await readModuleConfig({ dir: config.moduleConfigDir, sha256: config.moduleConfigSha256 });
        parameters = mergeModuleParameters(config.moduleParameters, fromFiles);
      }
      const result = await reloadDriver(kernel, built, {
        tree: tree(built),
        signaturePolicy,
        // The signatures the verdict was made of: the refusal and the verdict cannot disagree.
        readSignature: (file) => {
          const read = signatures.find((sig) => sig.module === file.name);
          return read === undefined ? readModuleSignature(file) : Promise.resolve(read);
        },
        hostTree: hostTree(built),
        loadPlan: LOAD_PLANS[config.loadPlan],
        enableOptional: config.loadOptional,
        unloadUserHolders: config.unloadUserHolders,
        neverUnload: config.neverUnload,
        firmware,
        // Beside the module cache: a host path that outlives the pod, as the cached modules it names.
        lastGoodFile: join(config.cacheDir, 'last-good', `${config.driver}-${built.kernelVersion}.json`),
        parameters,
        loadModules: toLoad(built),
        competingModules: config.blacklist,
        ...(deviceUsers === undefined ? {} : { deviceUsers }),
        unloadGuard: {
          // Our daemons hold the device files too: the unload checks for users after they stopped.
          stopsHolders: config.holders.length > 0 || daemons?.supervising() === true,
          takeDown: async () => {
            // The driver is about to go: its root's consumers stop trusting it first.
            await root?.withdrawReady();
            await daemons?.stop();
            await guard.takeDown(lastDetection?.devices ?? []);
          },
          restore: () => guard.restore(),
        },
        logger: log,
      });
      const summary =
        result.outcome === 'fast-path'
          ? `already loaded with the built srcversions: ${result.reason}`
          : `${result.outcome}: unloaded [${result.unloaded.join(', ')}], loaded [${result.loadOrder.map((s) => s.module).join(', ')}] (${result.reason})`;
      requested = result.requested;
      if (result.firmwarePathBefore !== undefined && result.firmwarePathBefore !== config.firmwareHostDir) firmwarePathBefore = result.firmwarePathBefore;
      return { changed: result.outcome !== 'fast-path', summary };
    },

    async verify(built) {
      const loaded = await readLoadedModules(kernel, built.modules.map((m) => m.name));
      const decision = decideReload(built.modules, requested ?? toLoad(built), loaded, parameters);
      if (decision.kind !== 'fast-path') {
        throw new DriverVerificationError(`the driver is not loaded as built: ${decision.reason}`, { reason: decision.reason });
      }
      // This driver is the node's driver now: its competing modules stay away after a reboot too.
      if (config.hostBlacklistDir !== undefined) await writeHostBlacklist(config.hostBlacklistDir, config.driver, config.blacklist);
      // A teardown an earlier agent recorded and did not finish (it died after the unload): finish it.
      if (await guard.restore()) log.info('finished the restore a previous agent recorded');
      // The daemons run beside a verified driver only (started here, again after a reload stopped them),
      // writing their sockets into the copy of the root that is about to be published.
      if (daemons !== undefined) await daemons.ensureRunning(lastDetection?.devices ?? [], await root?.prepare());
      // The root follows the loaded driver: published (or switched to this one) once it is verified
      // and its daemons run (an NVSwitch board without its fabric manager is not offered as ready).
      await root?.publish(built.modules[0]?.name ?? config.driver);
      return { version: built.version, modules: [...loaded.keys()], loadedDriver };
    },

    async unload() {
      if (lastBuilt === undefined) return;
      // Never-unload modules stay loaded on stop too; the rest of the driver's modules go.
      const pinned = new Set(config.neverUnload.map(sysfsModuleName));
      const modules = lastBuilt.modules.map((m) => m.name).filter((m) => !pinned.has(sysfsModuleName(m)));
      await daemons?.stop();
      await unloadDriver(kernel, config.driver, modules, log, deviceUsers);
      // Pinned modules stay loaded, and so does the root that goes with them.
      if (pinned.size === 0) await root?.release();
      if (firmwarePathBefore !== undefined) await restoreFirmwarePath(firmwarePathBefore);
    },
  };
}
