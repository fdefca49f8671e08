import type { ConfigProblem } from '../../shared/errors.ts';

/**
 * Something outside the kernel that holds the driver's devices and must stop before the unload
 * and start after the load: NVIDIA's nvidia-persistenced, nv-fabricmanager, nvlsm, or any command.
 */
export interface HolderCommand {
  /** Shown in logs, Events and failure messages. */
  readonly name: string;
  /**
   * `host`: run in the host's namespaces through the host PID namespace (the pod needs hostPID;
   * the agent prefixes `nsenter --target 1 --mount --uts --ipc --net --pid --`), for daemons the
   * host's systemd runs. `image`: run in the agent's container, for daemons the driver image runs.
   */
  readonly on: 'host' | 'image';
  /** Optional: exit 0 when the holder runs now. Not running: it is neither stopped nor started. */
  readonly check: readonly string[] | undefined;
  readonly stop: readonly string[];
  readonly start: readonly string[];
  /** Each command is killed after this long and the step fails (HolderCommandError). */
  readonly timeoutMs: number;
}

const DEFAULT_TIMEOUT_SECONDS = 60;

/**
 * Pure: parses `STOP_BEFORE_UNLOAD`, a JSON list of `{name, on?, check?, stop, start, timeoutSeconds?}`
 * (commands as argv arrays, `on` default `host`). Every bad field is a problem named by its index
 * (`[1].stop: ...`); the result holds the good entries.
 */
export function parseHolderCommands(text: string): { readonly holders: HolderCommand[]; readonly problems: ConfigProblem[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { holders: [], problems: [{ path: '', message: `not JSON: ${error instanceof Error ? error.message : String(error)}` }] };
  }
  if (!Array.isArray(parsed)) return { holders: [], problems: [{ path: '', message: 'must be a JSON list of {name, on, check, stop, start, timeoutSeconds}' }] };
  const holders: HolderCommand[] = [];
  const problems: ConfigProblem[] = [];
  const names = new Set<string>();
  for (const [i, item] of (parsed as unknown[]).entries()) {
    const holder = parseHolder(item, (field) => `[${i}]${field === '' ? '' : `.${field}`}`, problems, names);
    if (holder !== undefined) holders.push(holder);
  }
  return { holders, problems };
}

/** One entry of the list; undefined (and problems named with `at`) when any field is bad. */
function parseHolder(item: unknown, at: (field: string) => string, problems: ConfigProblem[], names: Set<string>): HolderCommand | undefined {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) {
    problems.push({ path: at(''), message: 'must be an object' });
    return undefined;
  }
  const entry = item as Record<string, unknown>;
  const before = problems.length;
  for (const key of Object.keys(entry)) {
    if (!['name', 'on', 'check', 'stop', 'start', 'timeoutSeconds'].includes(key)) problems.push({ path: at(key), message: 'unknown field' });
  }
  const name = entry['name'];
  if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.@-]*$/.test(name)) problems.push({ path: at('name'), message: 'required: letters, digits, _ . @ -' });
  else if (names.has(name)) problems.push({ path: at('name'), message: `"${name}" is listed twice` });
  else names.add(name);
  const on = entry['on'] ?? 'host';
  if (on !== 'host' && on !== 'image') problems.push({ path: at('on'), message: 'must be "host" or "image"' });
  const check = parseArgv(entry, 'check', false, at, problems);
  const stop = parseArgv(entry, 'stop', true, at, problems);
  const start = parseArgv(entry, 'start', true, at, problems);
  const timeout = entry['timeoutSeconds'] ?? DEFAULT_TIMEOUT_SECONDS;
  if (typeof timeout !== 'number' || !Number.isFinite(timeout) || timeout <= 0) problems.push({ path: at('timeoutSeconds'), message: 'must be a positive number of seconds' });
  if (problems.length > before || stop === undefined || start === undefined || typeof name !== 'string') return undefined;
  return { name, on: on as 'host' | 'image', check, stop, start, timeoutMs: (timeout as number) * 1000 };
}

function parseArgv(entry: Record<string, unknown>, field: 'check' | 'stop' | 'start', required: boolean, at: (field: string) => string, problems: ConfigProblem[]): string[] | undefined {
  const value = entry[field];
  if (value === undefined && !required) return undefined;
  if (!Array.isArray(value) || value.length === 0 || value.some((a) => typeof a !== 'string' || a === '')) {
    problems.push({ path: at(field), message: `${required ? 'required: ' : ''}a command as a non-empty list of non-empty strings, e.g. ["systemctl", "stop", "nvidia-persistenced"]` });
    return undefined;
  }
  return value as string[];
}
