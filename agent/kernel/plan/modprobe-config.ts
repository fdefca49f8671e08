import { ConfigError, type ConfigProblem } from '../../../shared/errors.ts';

/** Module parameters by module name, then parameter name (values as modprobe takes them). */
export type ModuleParameters = Readonly<Record<string, Readonly<Record<string, string>>>>;

const MODULE_NAME = /^[\w-]+$/;
const PARAMETER_NAME = /^[\w.]+$/;

/**
 * A modprobe.d file with one `options <module> k=v ...` line per module. Values with blanks are
 * double-quoted (modprobe keeps them as one argument); values with quotes or newlines cannot
 * be expressed in modprobe.d and are refused with every problem listed.
 */
export function renderModprobeOptions(parameters: ModuleParameters): string {
  const problems: ConfigProblem[] = [];
  const lines: string[] = [];
  for (const [module, params] of Object.entries(parameters)) {
    if (!MODULE_NAME.test(module)) problems.push({ path: `parameters.${module}`, message: 'not a module name' });
    const words: string[] = [];
    for (const [name, value] of Object.entries(params)) {
      if (!PARAMETER_NAME.test(name)) problems.push({ path: `parameters.${module}.${name}`, message: 'not a parameter name' });
      if (/["\n\r\\]/.test(value)) problems.push({ path: `parameters.${module}.${name}`, message: 'quotes, backslashes and newlines cannot be passed through modprobe.d' });
      words.push(/\s/.test(value) || value === '' ? `${name}="${value}"` : `${name}=${value}`);
    }
    if (words.length > 0) lines.push(`options ${module} ${words.join(' ')}`);
  }
  if (problems.length > 0) throw new ConfigError('module parameters', problems);
  return withHeader(lines);
}

/** A modprobe.d file that stops udev from autoloading `modules` (explicit `modprobe <name>` still works). */
export function renderBlacklist(modules: readonly string[]): string {
  return withHeader(modules.map((m) => `blacklist ${m}`));
}

function withHeader(lines: readonly string[]): string {
  return ['# Written by driver-rollout; rewritten on every driver load.', ...lines, ''].join('\n');
}

/** What the simulated kernel reads from modprobe.d: options per module and blacklisted names. */
export interface ModprobeConfig {
  readonly options: ReadonlyMap<string, Readonly<Record<string, string>>>;
  readonly blacklist: ReadonlySet<string>;
}

/**
 * Parses the `options` and `blacklist` lines of modprobe.d text (other directives ignored).
 * Later options for the same module add to earlier ones, as in modprobe. Module names are
 * normalised to `_`.
 */
export function parseModprobeConfig(texts: readonly string[]): ModprobeConfig {
  const options = new Map<string, Record<string, string>>();
  const blacklist = new Set<string>();
  for (const text of texts) {
    for (const raw of text.split('\n')) {
      const words = splitWords(raw.replace(/#.*$/, '').trim());
      const [directive, module, ...rest] = words;
      if (module === undefined) continue;
      const name = module.replaceAll('-', '_');
      if (directive === 'blacklist') blacklist.add(name);
      if (directive === 'options') options.set(name, { ...options.get(name), ...parseOptionWords(rest) });
    }
  }
  return { options, blacklist };
}

function parseOptionWords(words: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const word of words) {
    const eq = word.indexOf('=');
    if (eq > 0) out[word.slice(0, eq)] = word.slice(eq + 1);
    else out[word] = '';
  }
  return out;
}

/** Splits on blanks outside double quotes, dropping the quotes (`a="b c"` is one word `a=b c`). */
function splitWords(line: string): string[] {
  const words: string[] = [];
  let current = '';
  let quoted = false;
  let inWord = false;
  for (const ch of line) {
    if (ch === '"') {
      quoted = !quoted;
      inWord = true;
    } else if (/\s/.test(ch) && !quoted) {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(current);
  return words;
}
