import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigError, type ConfigProblem } from '../shared/errors.ts';
import type { DriverSource } from './build/build-driver.ts';
import { DEFAULT_KEY_DOMAIN } from '../shared/keys.ts';
import {
  DEVICE_KIND_SELECTORS,
  DEVICE_KINDS,
  deviceKindForDriver,
  normalizeHexId,
  type DeviceSelector,
} from './detect/device-selector.ts';


/** Everything the agent is told at start-up; parsed once by main.ts. */
export interface AgentConfig {
  readonly nodeName: string;
  readonly podName: string;
  readonly podNamespace: string;
  /** Short driver name (`gpu`, `ofed`, ...): the `%s` of every key. */
  readonly driver: string;
  readonly keyDomain: string;
  /** Version of the driver sources; labelled on the node once loaded. */
  readonly driverVersion: string;
  readonly source: DriverSource;
  /** Build and load for this kernel instead of `uname -r`. */
  readonly kernelVersion: string | undefined;
  /** Modules to load with modprobe (dependencies come along); empty = every module built. */
  readonly modules: readonly string[];
  /** Module parameters, written as modprobe.d `options` lines: module → parameter → value. */
  readonly moduleParameters: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** Inbox modules that compete with the driver (e.g. `nouveau`), blacklisted during the reload. */
  readonly blacklist: readonly string[];
  readonly deviceSelector: DeviceSelector;
  /** `/sys` on a node; a fixture tree in tests. `<sysfsRoot>/module` is where loaded modules show. */
  readonly sysfsRoot: string;
  /** Root of the module tree: modules go to `<moduleRoot>/lib/modules/<kver>/`, depmod -b uses it. */
  readonly moduleRoot: string;
  readonly cacheDir: string;
  readonly readyFile: string;
  readonly lockPath: string;
  readonly httpHost: string;
  /** 0 picks a free port (tests). */
  readonly httpPort: number;
  /** `simulated` models the kernel in memory: tests and the out-of-cluster demo. */
  readonly kernelAdapter: 'real' | 'simulated';
  readonly unloadOnStop: boolean;
  /** Undefined: in-cluster credentials. */
  readonly kubeconfig: string | undefined;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Backoff between failed attempts: doubles from `initialMs` up to `maxMs`. */
  readonly retry: { readonly initialMs: number; readonly maxMs: number };
  /**
   * kbuild trees to try, `{kernel}` standing for the target kernel release (e.g.
   * `/host/usr/src/linux-headers-{kernel}`); undefined: `/lib/modules/<kver>/build`, then
   * `/usr/src/linux-headers-<kver>`.
   */
  readonly headersDirs: readonly string[] | undefined;
  readonly makeVariables: Readonly<Record<string, string>>;
  readonly signing: { readonly privateKeyPath: string; readonly certificatePath: string } | undefined;
  /**
   * Where the modprobe.d files (options, blacklist during a reload) are written. The default,
   * /run/modprobe.d, is read by modprobe without `-C`, in the container and, through the
   * host-path mount, by the host's own modprobe (udev), so a blacklisted nouveau stays away.
   */
  readonly modprobeConfigDir: string;
  /**
   * Device files of the driver (`/dev/nvidia`, `/dev/infiniband/`): when set, a "driver is in use"
   * refusal names the processes (and pods) holding them, found in `procDir` (the host's /proc:
   * the pod needs hostPID). Empty: the refusal names the modules and counts only.
   */
  readonly deviceFilePrefixes: readonly string[];
  readonly procDir: string;
  /** The simulated kernel (`--kernel simulated`) only: tests and the demo. */
  readonly simulated: SimulatedKernelSettings;
}

export interface SimulatedKernelSettings {
  /** `uname -r` of the simulated kernel (default: the target kernel); another release makes modprobe fail (ENOEXEC). */
  readonly kernelRelease: string | undefined;
  /** Time each module's init takes, as a real GPU driver's does. */
  readonly loadMs: number;
  /** Modules whose init fails, with the errno text modprobe prints (`drsample_core:No such device`). */
  readonly initFailures: Readonly<Record<string, string>>;
}

/**
 * Every setting is a flag and an environment variable: `--node-name` and `NODE_NAME`, and so on
 * (the DaemonSet uses variables, the demo flags). Flags win. The few whose variable differs
 * from the flag name are listed in `ENV_NAMES`.
 */
const FLAGS = [
  'node-name',
  'pod-name',
  'pod-namespace',
  'driver-name',
  'key-domain',
  'driver-version',
  'driver-source-dir',
  'driver-source-url',
  'driver-source-sha256',
  'driver-source-strip-components',
  'kernel-version',
  'modules',
  'module-parameters',
  'blacklist',
  'device-kind',
  'device-vendors',
  'device-classes',
  'sysfs-root',
  'module-root',
  'cache-dir',
  'ready-file',
  'lock-path',
  'http-host',
  'http-port',
  'kernel',
  'unload-on-stop',
  'kubeconfig',
  'log-level',
  'retry-initial-seconds',
  'retry-max-seconds',
  'headers-dirs',
  'make-variables',
  'signing-key',
  'signing-cert',
  'modprobe-config-dir',
  'device-file-prefixes',
  'proc-dir',
  'simulated-kernel-release',
  'simulated-load-seconds',
  'simulated-init-failure',
] as const;
type Flag = (typeof FLAGS)[number];

const ENV_NAMES: Partial<Record<Flag, string>> = {
  kernel: 'KERNEL_ADAPTER',
  modules: 'DRIVER_MODULES',
  blacklist: 'MODULE_BLACKLIST',
  'signing-key': 'SIGNING_KEY_PATH',
  'signing-cert': 'SIGNING_CERT_PATH',
};

/** Every environment variable the agent reads (manifests are checked against this list). */
export function agentEnvironmentVariables(): string[] {
  return FLAGS.map(envName);
}

function envName(flag: Flag): string {
  return ENV_NAMES[flag] ?? flag.toUpperCase().replaceAll('-', '_');
}

const required = z.string({ error: 'required' }).min(1, 'required');
const optional = z.string().optional();
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const moduleName = /^[A-Za-z0-9_-]+$/;
const seconds = z.coerce.number().positive();

const schema = z.object({
  'node-name': required,
  'pod-name': required,
  'pod-namespace': required,
  'driver-name': required.regex(dnsLabel, 'must be lower-case letters, digits and dashes (it goes into label keys)'),
  'key-domain': z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a DNS domain').default(DEFAULT_KEY_DOMAIN),
  'driver-version': required,
  'driver-source-dir': optional,
  'driver-source-url': z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  'driver-source-sha256': z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lower-case hex digits').optional(),
  'driver-source-strip-components': z.coerce.number().int().min(0).optional(),
  'kernel-version': optional,
  modules: optional,
  'module-parameters': optional,
  blacklist: optional,
  'device-kind': z.enum(DEVICE_KINDS).optional(),
  'device-vendors': optional,
  'device-classes': optional,
  'sysfs-root': z.string().default('/sys'),
  'module-root': z.string().default('/'),
  'cache-dir': z.string().default('/var/lib/driver-rollout/cache'),
  'ready-file': optional,
  'lock-path': optional,
  'http-host': z.string().default('0.0.0.0'),
  'http-port': z.coerce.number().int().min(0).max(65535).default(8080),
  kernel: z.enum(['real', 'simulated']).default('real'),
  'unload-on-stop': z.stringbool().default(false),
  kubeconfig: optional,
  'log-level': z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  'retry-initial-seconds': seconds.default(10),
  'retry-max-seconds': seconds.default(300),
  'headers-dirs': optional,
  'make-variables': optional,
  'signing-key': optional,
  'signing-cert': optional,
  'modprobe-config-dir': z.string().default('/run/modprobe.d'),
  'device-file-prefixes': optional,
  'proc-dir': z.string().default('/proc'),
  'simulated-kernel-release': optional,
  'simulated-load-seconds': z.coerce.number().min(0).default(0),
  'simulated-init-failure': optional,
});
type Raw = z.infer<typeof schema>;

/**
 * Parses flags and environment into the agent's config, or throws ConfigError listing every
 * problem (each named by its flag and variable). Nothing is half-applied.
 */
export function parseAgentConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): AgentConfig {
  let flags: Partial<Record<Flag, string | boolean>>;
  try {
    const options = Object.fromEntries(FLAGS.map((f) => [f, { type: 'string' as const }]));
    flags = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigError('agent flags', [{ path: 'argv', message: error instanceof Error ? error.message : String(error) }]);
  }
  const input: Record<string, string | undefined> = {};
  for (const flag of FLAGS) {
    const value = flags[flag] ?? env[envName(flag)];
    input[flag] = typeof value === 'string' && value !== '' ? value : undefined;
  }
  // Fields are parsed one by one so that a bad field does not hide the problems of the others,
  // including the checks across fields below (which see a failed field as unset).
  const problems: ConfigProblem[] = [];
  const values: Record<string, unknown> = {};
  for (const flag of FLAGS) {
    const field = schema.shape[flag];
    const result = field.safeParse(input[flag]);
    if (result.success) {
      values[flag] = result.data;
    } else {
      for (const issue of result.error.issues) problems.push(problem(flag, issue.message));
      const fallback = field.safeParse(undefined);
      values[flag] = fallback.success ? fallback.data : '';
    }
  }
  const config = assemble(values as Raw, problems);
  if (problems.length > 0) throw new ConfigError('agent configuration', problems);
  return config;
}

function problem(field: string, message: string): ConfigProblem {
  const flag = FLAGS.find((f) => f === field);
  return { path: flag === undefined ? field : `--${flag} / ${envName(flag)}`, message };
}

function assemble(c: Raw, problems: ConfigProblem[]): AgentConfig {
  const runDir = join('/run/driver-rollout', c['driver-name']);
  const retry = { initialMs: c['retry-initial-seconds'] * 1000, maxMs: c['retry-max-seconds'] * 1000 };
  if (retry.maxMs < retry.initialMs) problems.push(problem('retry-max-seconds', 'must not be below --retry-initial-seconds'));
  const headersDirs = c['headers-dirs'] === undefined ? undefined : splitList(c['headers-dirs']);
  return {
    nodeName: c['node-name'],
    podName: c['pod-name'],
    podNamespace: c['pod-namespace'],
    driver: c['driver-name'],
    keyDomain: c['key-domain'],
    driverVersion: c['driver-version'],
    source: driverSource(c, problems),
    kernelVersion: c['kernel-version'],
    modules: moduleList(c, 'modules', problems),
    moduleParameters: moduleParameters(c['module-parameters'], problems),
    blacklist: moduleList(c, 'blacklist', problems),
    deviceSelector: deviceSelector(c, problems),
    sysfsRoot: c['sysfs-root'],
    moduleRoot: c['module-root'],
    cacheDir: c['cache-dir'],
    readyFile: c['ready-file'] ?? join(runDir, '.driver-ready'),
    lockPath: c['lock-path'] ?? join(runDir, 'agent.lock'),
    httpHost: c['http-host'],
    httpPort: c['http-port'],
    kernelAdapter: c.kernel,
    unloadOnStop: c['unload-on-stop'],
    kubeconfig: c.kubeconfig,
    logLevel: c['log-level'],
    retry,
    headersDirs,
    makeVariables: keyValues(c['make-variables'], 'make-variables', problems),
    signing: signing(c, problems),
    modprobeConfigDir: c['modprobe-config-dir'],
    deviceFilePrefixes: absolutePaths(c, 'device-file-prefixes', problems),
    procDir: c['proc-dir'],
    simulated: {
      kernelRelease: c['simulated-kernel-release'],
      loadMs: c['simulated-load-seconds'] * 1000,
      initFailures: initFailures(c['simulated-init-failure'], problems),
    },
  };
}

function driverSource(c: Raw, problems: ConfigProblem[]): DriverSource {
  const dir = c['driver-source-dir'];
  const url = c['driver-source-url'];
  const sha256 = c['driver-source-sha256'];
  if (dir !== undefined && url !== undefined) {
    problems.push(problem('driver-source-dir', 'give either a source directory or a tarball URL, not both'));
  }
  if (url !== undefined) {
    if (sha256 === undefined) problems.push(problem('driver-source-sha256', 'required with --driver-source-url: downloads are verified'));
    const strip = c['driver-source-strip-components'];
    return { kind: 'tarball', url, sha256: sha256 ?? '', ...(strip === undefined ? {} : { stripComponents: strip }) };
  }
  if (dir === undefined) {
    problems.push(problem('driver-source-dir', 'required: a kbuild source directory, or --driver-source-url with --driver-source-sha256'));
  }
  return { kind: 'directory', path: dir ?? '' };
}

function absolutePaths(c: Raw, field: 'device-file-prefixes', problems: ConfigProblem[]): string[] {
  const paths = splitList(c[field] ?? '');
  const bad = paths.filter((p) => !p.startsWith('/'));
  if (bad.length > 0) problems.push(problem(field, `not absolute paths: ${bad.join(', ')}`));
  return paths;
}

function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s !== '');
}

function moduleList(c: Raw, field: 'modules' | 'blacklist', problems: ConfigProblem[]): string[] {
  const names = splitList(c[field] ?? '');
  const bad = names.filter((n) => !moduleName.test(n));
  if (bad.length > 0) problems.push(problem(field, `not module names: ${bad.join(', ')}`));
  return names;
}

/** `module.param=value` items separated by spaces or commas, e.g. `nvidia.NVreg_OpenRmEnableUnsupportedGpus=1`. */
function moduleParameters(text: string | undefined, problems: ConfigProblem[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const item of splitList(text ?? '')) {
    const m = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)=(.*)$/.exec(item);
    if (m?.[1] === undefined || m[2] === undefined || m[3] === undefined) {
      problems.push(problem('module-parameters', `"${item}" is not module.parameter=value`));
      continue;
    }
    (out[m[1]] ??= {})[m[2]] = m[3];
  }
  return out;
}

function keyValues(text: string | undefined, field: 'make-variables', problems: ConfigProblem[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of splitList(text ?? '')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(item);
    if (m?.[1] === undefined || m[2] === undefined) {
      problems.push(problem(field, `"${item}" is not NAME=value`));
      continue;
    }
    out[m[1]] = m[2];
  }
  return out;
}

/**
 * Explicit vendors and classes win; else `--device-kind`; else the kind the driver name
 * implies (`gpu` → NVIDIA GPUs, `ofed` → Mellanox NICs).
 */
function deviceSelector(c: Raw, problems: ConfigProblem[]): DeviceSelector {
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
function hexList(c: Raw, field: 'device-vendors' | 'device-classes', digits: number, problems: ConfigProblem[]): string[] | undefined {
  const text = c[field];
  if (text === undefined) return undefined;
  const items = splitList(text);
  const ids = items.map((i) => normalizeHexId(i, digits));
  const bad = items.filter((_, n) => ids[n] === undefined);
  if (bad.length > 0) problems.push(problem(field, `not ${digits}-digit hex ids: ${bad.join(', ')}`));
  return ids.filter((id): id is string => id !== undefined);
}

/** `module:errno text` items separated by commas: `drsample_core:No such device`. */
function initFailures(text: string | undefined, problems: ConfigProblem[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of (text ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^([A-Za-z0-9_-]+):(.+)$/.exec(item);
    if (m?.[1] === undefined || m[2] === undefined) {
      problems.push(problem('simulated-init-failure', `"${item}" is not module:errno text`));
      continue;
    }
    out[m[1]] = m[2].trim();
  }
  return out;
}

function signing(c: Raw, problems: ConfigProblem[]): AgentConfig['signing'] {
  const privateKeyPath = c['signing-key'];
  const certificatePath = c['signing-cert'];
  if (privateKeyPath === undefined && certificatePath === undefined) return undefined;
  if (privateKeyPath === undefined || certificatePath === undefined) {
    problems.push(problem(privateKeyPath === undefined ? 'signing-key' : 'signing-cert', 'module signing needs both the key and the certificate'));
    return undefined;
  }
  return { privateKeyPath, certificatePath };
}
