/**
 * What makes two loads of a driver the same load: the driver version and the settings that
 * change what the agent loads (modules, load plan, optional modules, module parameters, the
 * verified source tarball). The agent publishes the identity it loaded on its node
 * (`driver-rollout.io/<driver>-driver-loaded`, written with the pod that loaded it); the
 * coordinator computes the identity a driver DaemonSet's template would load from the agent
 * container's environment, and restarts a pod whose template changed in nothing of this
 * without cordon or drain (coordinator/plan/restart-only.ts).
 *
 * The fingerprint is compact canonical JSON, not a hash: `kubectl get node -o yaml` shows what is
 * loaded and a person can see why a node took the full upgrade path; it is compared as a string,
 * so no hash scheme has to stay in step between agent and coordinator versions, and a change of
 * format only makes the two differ (the full path: safe).
 *
 * The version is trusted to name the sources: a new image that brings other sources under the
 * same DRIVER_VERSION is taken for the same driver. If its modules differ (srcversion), the agent
 * reloads; on a node in use that is refused (DriverInUse) before anything is unloaded, and the
 * coordinator fails the node after podRestart.failAfterSeconds. Pure; no I/O.
 */

export interface DriverIdentity {
  readonly version: string;
  /** Modules to load as configured (empty: every module built). */
  readonly modules: readonly string[];
  readonly loadPlan: string;
  readonly loadOptional: readonly string[];
  /** module → parameter → value. */
  readonly parameters: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** SHA-256 of the source tarball when the sources are downloaded; undefined for sources in the image. */
  readonly sourceSha256?: string | undefined;
  /** SHA-256 of the module config files (MODULE_CONFIG_DIR) the template was made with; undefined without them. */
  readonly moduleConfigSha256?: string | undefined;
}

/** The agent's load plan when LOAD_PLAN is not set (agent/config/kernel.ts). */
export const DEFAULT_LOAD_PLAN = 'generic';

/**
 * The agent's settings that make up the identity, by flag (without `--`) and environment variable
 * (agent/config/flag-fields.ts envName; a unit test checks both lists against the agent's).
 */
export const IDENTITY_SETTINGS = {
  version: { flag: 'driver-version', env: 'DRIVER_VERSION' },
  modules: { flag: 'modules', env: 'DRIVER_MODULES' },
  loadPlan: { flag: 'load-plan', env: 'LOAD_PLAN' },
  loadOptional: { flag: 'load-optional', env: 'LOAD_OPTIONAL' },
  parameters: { flag: 'module-parameters', env: 'MODULE_PARAMETERS' },
  sourceSha256: { flag: 'driver-source-sha256', env: 'DRIVER_SOURCE_SHA256' },
  moduleConfigSha256: { flag: 'module-config-sha256', env: 'MODULE_CONFIG_SHA256' },
} as const;

/** Items separated by spaces or commas. */
export function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s !== '');
}

/**
 * `module.param=value` items separated by spaces or commas, e.g.
 * `nvidia.NVreg_OpenRmEnableUnsupportedGpus=1`; items that are not are returned in `bad`.
 */
export function parseModuleParameters(text: string): { readonly parameters: Record<string, Record<string, string>>; readonly bad: readonly string[] } {
  const parameters: Record<string, Record<string, string>> = {};
  const bad: string[] = [];
  for (const item of splitList(text)) {
    const m = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)=(.*)$/.exec(item);
    if (m?.[1] === undefined || m[2] === undefined || m[3] === undefined) {
      bad.push(item);
      continue;
    }
    (parameters[m[1]] ??= {})[m[2]] = m[3];
  }
  return { parameters, bad };
}

/** The kernel treats `-` and `_` in module names alike (`nvidia-drm` is `nvidia_drm`). */
const moduleKey = (name: string): string => name.replaceAll('-', '_');

function sortedObject<T>(entries: Iterable<readonly [string, T]>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Canonical JSON of an identity: module names normalised, lists and keys sorted; equal loads give equal strings. */
export function driverFingerprint(identity: DriverIdentity): string {
  const list = (names: readonly string[]) => [...new Set(names.map(moduleKey))].sort();
  const parameters = new Map<string, Map<string, string>>();
  for (const [module, values] of Object.entries(identity.parameters)) {
    const merged = parameters.get(moduleKey(module)) ?? new Map<string, string>();
    for (const [name, value] of Object.entries(values)) merged.set(name, value);
    parameters.set(moduleKey(module), merged);
  }
  return JSON.stringify({
    version: identity.version,
    modules: list(identity.modules),
    loadPlan: identity.loadPlan,
    loadOptional: list(identity.loadOptional),
    parameters: sortedObject([...parameters].filter(([, v]) => v.size > 0).map(([m, v]) => [m, sortedObject(v)] as const)),
    ...(identity.sourceSha256 === undefined ? {} : { sourceSha256: identity.sourceSha256 }),
    ...(identity.moduleConfigSha256 === undefined ? {} : { moduleConfigSha256: identity.moduleConfigSha256 }),
  });
}

/**
 * The identity the agent would load with these settings (the agent container's literal
 * environment, or its flags); null when it cannot be known: no version, or a module parameter
 * the agent would refuse.
 */
export function driverIdentityFromSettings(value: (setting: keyof typeof IDENTITY_SETTINGS) => string | undefined): DriverIdentity | null {
  const version = value('version');
  if (version === undefined || version === '') return null;
  const { parameters, bad } = parseModuleParameters(value('parameters') ?? '');
  if (bad.length > 0) return null;
  const sha = value('sourceSha256');
  const configSha = nonEmpty(value('moduleConfigSha256'));
  return {
    version,
    modules: splitList(value('modules') ?? ''),
    loadPlan: nonEmpty(value('loadPlan')) ?? DEFAULT_LOAD_PLAN,
    loadOptional: splitList(value('loadOptional') ?? ''),
    parameters,
    ...(nonEmpty(sha) === undefined ? {} : { sourceSha256: sha }),
    ...(configSha === undefined ? {} : { moduleConfigSha256: configSha }),
  };
}

function nonEmpty(text: string | undefined): string | undefined {
  return text === undefined || text === '' ? undefined : text;
}

/** What the agent publishes: the fingerprint it loaded and the pod (`namespace/name`) that loaded it. */
export interface LoadedDriver {
  readonly pod: string;
  readonly fingerprint: string;
}

/** What the annotation says, read back: the version too, for messages. */
export interface PublishedDriver extends LoadedDriver {
  readonly version: string;
}

/** The annotation's value: `{"pod":"<ns>/<name>","driver":<fingerprint>}`. */
export function renderLoadedDriver(loaded: LoadedDriver): string {
  return `{"pod":${JSON.stringify(loaded.pod)},"driver":${loaded.fingerprint}}`;
}

/** Reads the annotation; the driver part is re-canonicalised. null when absent or not ours. */
export function parseLoadedDriver(text: string | undefined): PublishedDriver | null {
  const parsed = text === undefined ? null : parseJsonObject(text);
  if (parsed === null) return null;
  const { pod, driver } = parsed;
  const identity = driverIdentityIn(driver);
  return typeof pod !== 'string' || identity === null ? null : { pod, fingerprint: driverFingerprint(identity), version: identity.version };
}

/** `text` as a JSON object; null when it is not JSON or not an object. */
export function parseJsonObject(text: string): Record<string, unknown> | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
}

/** The identity a published record's `driver` part holds (parseDriverIdentity); null when it is not an object or not an identity. */
export function driverIdentityIn(driver: unknown): DriverIdentity | null {
  return typeof driver === 'object' && driver !== null ? parseDriverIdentity(driver as Record<string, unknown>) : null;
}

/** An identity as JSON parsed it (the `driver` part of what the agent publishes); null when a field is missing or of another type. */
function parseDriverIdentity(d: Record<string, unknown>): DriverIdentity | null {
  const strings = (v: unknown): string[] | null => (Array.isArray(v) && v.every((s) => typeof s === 'string') ? v : null);
  const modules = strings(d['modules']);
  const loadOptional = strings(d['loadOptional']);
  const { version, loadPlan, parameters, sourceSha256, moduleConfigSha256 } = d;
  if (typeof version !== 'string' || typeof loadPlan !== 'string' || modules === null || loadOptional === null) return null;
  if (typeof parameters !== 'object' || parameters === null) return null;
  const params: Record<string, Record<string, string>> = {};
  for (const [module, values] of Object.entries(parameters)) {
    if (typeof values !== 'object' || values === null) return null;
    for (const [name, value] of Object.entries(values as Record<string, unknown>)) {
      if (typeof value !== 'string') return null;
      (params[module] ??= {})[name] = value;
    }
  }
  if (sourceSha256 !== undefined && typeof sourceSha256 !== 'string') return null;
  if (moduleConfigSha256 !== undefined && typeof moduleConfigSha256 !== 'string') return null;
  return {
    version,
    modules,
    loadPlan,
    loadOptional,
    parameters: params,
    ...(sourceSha256 === undefined ? {} : { sourceSha256 }),
    ...(moduleConfigSha256 === undefined ? {} : { moduleConfigSha256 }),
  };
}
