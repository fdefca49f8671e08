import type { Logger } from 'pino';
import type { KernelPort, ModuleTree } from '../../../agent/kernel/kernel-port.ts';
import type { ModuleParameters } from '../../../agent/kernel/plan/modprobe-config.ts';
import { restoreFirmwarePath } from '../../../agent/kernel/driver-firmware.ts';
import { reloadDriver, type DriverToLoad, type ReloadDriverOptions, type ReloadResult } from '../../../agent/kernel/reload-driver.ts';
import { unloadDriver, type DeviceUserLookup } from '../../../agent/kernel/unload-driver.ts';
import { DriverRolloutError } from '../../../shared/errors.ts';
import type { LoadedModule } from '../../../shared/kmod/loaded-module.ts';
import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';
import type { DriverState } from '../../../agent/report/driver-state.ts';
import type { NextKernelPass } from './run-next-kernel-pass.ts';

/**
 * Kernel-test scenarios as data: steps the agent (reloadDriver) and a workload take, run against
 * a world: the real kernel in the guest (run-scenario.ts) or the simulated one on the host.
 */
export type ScenarioStep =
  /** The agent makes the kernel run `built` (reloadDriver). */
  | {
      readonly kind: 'reload';
      readonly built: DriverToLoad;
      readonly tree: ModuleTree;
      readonly parameters: ModuleParameters;
      /** Device files whose holders a refusal should name (the agent's opt-in /proc scan). */
      readonly deviceUsers?: DeviceUserLookup;
      /** Inbox modules to unload first and blacklist during the reload. */
      readonly competingModules?: readonly string[];
      /** More of reloadDriver's options (all plain data): host tree, modules to load, load plan, firmware, rollback record. */
      readonly more?: Pick<ReloadDriverOptions, 'hostTree' | 'loadModules' | 'loadPlan' | 'enableOptional' | 'firmware' | 'lastGoodFile'>;
    }
  /** The agent puts the kernel's custom firmware path back (on stop). */
  | { readonly kind: 'restore-firmware-path'; readonly previousPath: string }
  /** The agent unloads the driver (on stop, when configured to): unloadDriver. */
  | { readonly kind: 'unload-driver'; readonly driver: string; readonly modules: readonly string[] }
  /** A workload starts with the device open and keeps it open. */
  | { readonly kind: 'hold-device'; readonly device: string }
  /** That workload ends. */
  | { readonly kind: 'release-device' }
  /** Opens and closes the device: does the loaded driver still serve it? */
  | { readonly kind: 'open-device'; readonly device: string }
  /** The adapter's unload (rmmod) of one module, bypassing reloadDriver's own in-use check. */
  | { readonly kind: 'unload-module'; readonly module: string }
  /**
   * The whole agent (assembleAgent with this world's kernel), configured by `env` as in its
   * DaemonSet, for one attempt: detect, build, load, verify (run-agent-attempt.ts).
   */
  | { readonly kind: 'agent-attempt'; readonly env: Readonly<Record<string, string>>; readonly timeoutMs: number }
  /**
   * One pass of the agent's next-kernel preflight, configured by `env` as in its DaemonSet: the
   * driver for every other kernel with installed headers, judged before a reboot (run-next-kernel-pass.ts).
   */
  | { readonly kind: 'next-kernel-pass'; readonly env: Readonly<Record<string, string>> };

export interface Scenario {
  readonly steps: readonly ScenarioStep[];
  /** Modules whose /sys/module entry is reported after every step. */
  readonly watch: readonly string[];
}

export interface StepReport {
  readonly kind: ScenarioStep['kind'];
  readonly durationMs: number;
  readonly result?: ReloadResult;
  /** For unload-driver: the modules unloaded, in order. */
  readonly unloaded?: readonly string[];
  readonly error?: { readonly name: string; readonly message: string; readonly fields: Readonly<Record<string, unknown>> };
  /** For hold-device: the pid of the process holding the device, when the workload is a process. */
  readonly holderPid?: number;
  /** For open-device: the errno code when the open failed. */
  readonly openError?: string;
  /** For agent-attempt: the state the agent reported when its attempt ended (Loaded, NoDevice or Failed). */
  readonly agentState?: DriverState;
  /** For next-kernel-pass: what the pass found and reported. */
  readonly nextKernel?: NextKernelPass;
  /** /sys/module/<m> of the watched modules after the step, read by the scenario, not the agent. */
  readonly after: Readonly<Record<string, LoadedModule | null>>;
  /** Kernel log lines written during the step (module init/exit messages), in the kernel's order. */
  readonly kernelLog: readonly string[];
}

export interface ScenarioReport {
  readonly steps: readonly StepReport[];
}

/** What the guest's scenario server writes back for one scenario. */
export type ScenarioOutcome = { readonly report: ScenarioReport } | { readonly failure: string };

/** What a scenario acts on. */
export interface ScenarioWorld {
  readonly kernel: KernelPort;
  /** Where the kernel shows loaded modules (/sys/module, or the simulated kernel's tree). */
  readonly sysModuleDir: string;
  /** /sys/module/firmware_class/parameters/path, or the simulated world's stand-in. */
  readonly firmwareClassPath?: string;
  /** A workload opens the device and keeps it open; its pid when it is a process. */
  holdDevice(device: string): Promise<number | undefined>;
  /** Ends every workload started by holdDevice; resolves once their references are gone. */
  releaseDevices(): Promise<void>;
  /** The errno code when opening the device fails. */
  openDevice(device: string): Promise<string | undefined>;
  clearKernelLog(): Promise<void>;
  readKernelLog(): Promise<string[]>;
}

export async function runScenario(world: ScenarioWorld, scenario: Scenario, logger: Logger): Promise<ScenarioReport> {
  const reports: StepReport[] = [];
  try {
    for (const step of scenario.steps) {
      // The kernel log is the kernel's own account of what was loaded and unloaded, in order.
      await world.clearKernelLog();
      const started = performance.now();
      const outcome = await runStep(world, step, logger);
      const durationMs = Math.round(performance.now() - started);
      reports.push({ kind: step.kind, durationMs, ...outcome, after: await snapshot(world.sysModuleDir, scenario.watch), kernelLog: await world.readKernelLog() });
    }
  } finally {
    await world.releaseDevices();
  }
  return { steps: reports };
}

type StepOutcome = Pick<StepReport, 'result' | 'unloaded' | 'error' | 'holderPid' | 'openError' | 'agentState' | 'nextKernel'>;

async function runStep(world: ScenarioWorld, step: ScenarioStep, logger: Logger): Promise<StepOutcome> {
  switch (step.kind) {
    case 'reload': {
      let result: ReloadResult | undefined;
      const failure = await reportError(async () => {
        result = await reloadDriver(world.kernel, step.built, {
          tree: step.tree,
          parameters: step.parameters,
          logger,
          ...(step.deviceUsers === undefined ? {} : { deviceUsers: step.deviceUsers }),
          ...(step.competingModules === undefined ? {} : { competingModules: step.competingModules }),
          ...step.more,
        });
      });
      return result === undefined ? failure : { result };
    }
    case 'unload-driver': {
      let unloaded: readonly string[] | undefined;
      const failure = await reportError(async () => {
        unloaded = await unloadDriver(world.kernel, step.driver, step.modules, logger);
      });
      return unloaded === undefined ? failure : { unloaded };
    }
    case 'hold-device': {
      const pid = await world.holdDevice(step.device);
      return pid === undefined ? {} : { holderPid: pid };
    }
    case 'release-device':
      await world.releaseDevices();
      return {};
    case 'open-device': {
      const openError = await world.openDevice(step.device);
      return openError === undefined ? {} : { openError };
    }
    case 'unload-module':
      return reportError(() => world.kernel.unload(step.module));
    case 'restore-firmware-path':
      return reportError(() => restoreFirmwarePath(step.previousPath, world.firmwareClassPath));
    case 'agent-attempt': {
      // Imported here: the Kubernetes client and the rest of the agent cost seconds to load
      // under emulation, and only this step needs them.
      const { runAgentAttempt } = await import('./run-agent-attempt.ts');
      return { agentState: await runAgentAttempt(world.kernel, step.env, logger, step.timeoutMs) };
    }
    case 'next-kernel-pass': {
      // Imported here for the same reason as the agent's attempt.
      const { runNextKernelPass } = await import('./run-next-kernel-pass.ts');
      return { nextKernel: await runNextKernelPass(step.env, logger) };
    }
  }
}

/** Errors of the agent are results here: their class, message and structured fields. */
async function reportError(action: () => Promise<void>): Promise<Pick<StepReport, 'error'>> {
  try {
    await action();
    return {};
  } catch (thrown) {
    if (!(thrown instanceof Error)) throw thrown;
    return { error: { name: thrown.name, message: thrown.message, fields: thrown instanceof DriverRolloutError ? thrown.fields : {} } };
  }
}

async function snapshot(sysModuleDir: string, modules: readonly string[]): Promise<Record<string, LoadedModule | null>> {
  const out: Record<string, LoadedModule | null> = {};
  for (const m of modules) out[m] = (await readLoadedModule(sysModuleDir, m)) ?? null;
  return out;
}
