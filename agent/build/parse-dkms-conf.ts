import { BuildConfigError } from './build-errors.ts';

/** One module a DKMS package builds (dkms.conf's BUILT_MODULE_* / DEST_MODULE_* record). */
export interface DkmsModuleRecord {
  /** File name without `.ko` that the build writes (BUILT_MODULE_NAME). */
  readonly builtName: string;
  /** Directory of that file relative to the build tree, '' or ending in '/' (BUILT_MODULE_LOCATION). */
  readonly builtLocation: string;
  /** Name dkms stores the module under, `<tree>/<m>/<v>/<kernel>/<arch>/module/<destName>.ko` (DEST_MODULE_NAME). */
  readonly destName: string;
  /** Where `dkms install` would put it (DEST_MODULE_LOCATION); informational, the agent never installs with dkms. */
  readonly destLocation: string;
}

/** What the agent needs from a dkms.conf, with dkms's own defaults applied. */
export interface DkmsConf {
  readonly packageName: string;
  readonly packageVersion: string;
  readonly modules: readonly DkmsModuleRecord[];
  /** PRE_BUILD / POST_BUILD script commands (relative to the build tree), when set. */
  readonly preBuild: string | undefined;
  readonly postBuild: string | undefined;
}

/** Variables dkms sets before it sources dkms.conf (`$kernelver`, `$arch`...). */
export type DkmsConfContext = Readonly<Record<string, string>>;

/**
 * Reads a dkms.conf without running it: shell assignments (`NAME=value`, `NAME[i]=value`) with
 * single and double quotes, backslash continuations, comments, and `$NAME` / `${NAME}` /
 * `${NAME:-x}` / `${NAME+x}` expansion from the context and earlier assignments. Statements that
 * are not assignments are skipped; a module record that would need command substitution is an
 * error, since the agent cannot know what dkms would compute. Defaults follow dkms 3's read_conf:
 * DEST_MODULE_NAME falls back to BUILT_MODULE_NAME, a lone record's BUILT_MODULE_NAME to
 * PACKAGE_NAME, and locations get a trailing `/`.
 */
export function parseDkmsConf(text: string, context: DkmsConfContext, file = 'dkms.conf'): DkmsConf {
  const { scalars, arrays } = readAssignments(text, context);
  const problem = (message: string): BuildConfigError => new BuildConfigError(`${file}: ${message}`, { file });
  const packageName = scalars.get('PACKAGE_NAME') ?? '';
  const packageVersion = scalars.get('PACKAGE_VERSION') ?? '';
  if (packageName === '') throw problem('PACKAGE_NAME is not set');
  if (packageVersion === '') throw problem('PACKAGE_VERSION is not set');
  const modules = moduleRecords(arrays, packageName, problem);
  const optional = (name: string): string | undefined => {
    const value = scalars.get(name);
    return value === undefined || value === '' ? undefined : value;
  };
  return { packageName, packageVersion, modules, preBuild: optional('PRE_BUILD'), postBuild: optional('POST_BUILD') };
}

type Arrays = Map<string, (string | undefined)[]>;

/** Every `NAME=value` / `NAME[i]=value` in order, expanded against the context and earlier ones. */
function readAssignments(text: string, context: DkmsConfContext): { scalars: Map<string, string>; arrays: Arrays } {
  const scalars = new Map<string, string>(Object.entries(context));
  const arrays: Arrays = new Map();
  for (const statement of splitStatements(text)) {
    const match = /^([A-Za-z_]\w*)(?:\[(\d+)\])?=/.exec(statement);
    if (match === null) continue;
    const [, name = '', index] = match;
    const value = readWord(statement.slice(match[0].length), scalars, arrays);
    if (index === undefined) {
      scalars.set(name, value);
      arrays.set(name, [value]);
      continue;
    }
    const list = arrays.get(name) ?? [];
    list[Number(index)] = value;
    arrays.set(name, list);
    if (index === '0') scalars.set(name, value);
  }
  return { scalars, arrays };
}

/** The BUILT_MODULE_* / DEST_MODULE_* records with dkms 3's defaults (see parseDkmsConf). */
function moduleRecords(arrays: Arrays, packageName: string, problem: (message: string) => Error): DkmsModuleRecord[] {
  const field = (name: string): readonly (string | undefined)[] => arrays.get(name) ?? [];
  const builtNames = field('BUILT_MODULE_NAME');
  const builtLocations = field('BUILT_MODULE_LOCATION');
  const destNames = field('DEST_MODULE_NAME');
  const destLocations = field('DEST_MODULE_LOCATION');
  const count = Math.max(builtNames.length, builtLocations.length, destNames.length, destLocations.length);
  const modules: DkmsModuleRecord[] = [];
  for (let i = 0; i < count; i++) {
    const builtName = nonEmpty(builtNames[i]) ?? (destLocations.length === 1 ? packageName : undefined);
    if (builtName === undefined) throw problem(`record ${i} has no BUILT_MODULE_NAME`);
    const destName = nonEmpty(destNames[i]) ?? builtName;
    for (const [what, value] of [['BUILT_MODULE_NAME', builtName], ['DEST_MODULE_NAME', destName]] as const) {
      if (/\.k?o$/.test(value)) throw problem(`${what}[${i}] "${value}" must not end in .o or .ko`);
    }
    const builtLocation = builtLocations[i] ?? '';
    const record = {
      builtName,
      builtLocation: builtLocation === '' || builtLocation.endsWith('/') ? builtLocation : `${builtLocation}/`,
      destName,
      destLocation: destLocations[i] ?? '',
    };
    const substituted = Object.entries(record).find(([, value]) => /\$\(|`/.test(value));
    if (substituted !== undefined) throw problem(`record ${i}'s ${substituted[0]} "${substituted[1]}" uses command substitution, which the agent does not run`);
    modules.push(record);
  }
  if (modules.length === 0) throw problem('no BUILT_MODULE_NAME: the package declares no modules');
  return modules;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** Splits shell text into simple statements: joins `\`-continued lines, drops comments, splits on newlines and `;` outside quotes. */
function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current = '';
  let quote: '"' | "'" | undefined;
  const flush = (): void => {
    if (current.trim() !== '') statements.push(current.trim());
    current = '';
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (quote === undefined) {
      if (c === '\\' && text[i + 1] === '\n') {
        i++;
        continue;
      }
      if (c === '#' && (current === '' || /\s$/.test(current))) {
        i = endOfLine(text, i) - 1;
        continue;
      }
      if (c === '\n' || c === ';') {
        flush();
        continue;
      }
    }
    if (c === '\\' && quote !== "'" && i + 1 < text.length) {
      current += c + (text[i + 1] ?? '');
      i++;
      continue;
    }
    if (c === '"' || c === "'") {
      if (quote === undefined) quote = c;
      else if (quote === c) quote = undefined;
    }
    current += c;
  }
  flush();
  return statements;
}

function endOfLine(text: string, from: number): number {
  const end = text.indexOf('\n', from);
  return end === -1 ? text.length : end;
}

/** The first shell word of `text` with quotes removed and parameters expanded. */
function readWord(text: string, scalars: ReadonlyMap<string, string>, arrays: ReadonlyMap<string, readonly (string | undefined)[]>): string {
  let out = '';
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (quote === undefined && /\s/.test(c)) break;
    if (quote !== "'" && c === '\\') {
      const next = text[i + 1] ?? '';
      if (quote === undefined || '"\\$`'.includes(next)) {
        out += next;
        i++;
        continue;
      }
      out += c;
      continue;
    }
    if (c === '"' || c === "'") {
      if (quote === undefined) {
        quote = c;
        continue;
      }
      if (quote === c) {
        quote = undefined;
        continue;
      }
    }
    if (c === '$' && quote !== "'") {
      const expanded = expandParameter(text, i, scalars, arrays);
      if (expanded !== undefined) {
        out += expanded.value;
        i = expanded.end - 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

/** `$NAME`, `${NAME}`, `${NAME[i]}`, `${NAME:-x}`, `${NAME-x}`, `${NAME:+x}`, `${NAME+x}` at `start`; undefined for anything else (kept literally). */
function expandParameter(
  text: string,
  start: number,
  scalars: ReadonlyMap<string, string>,
  arrays: ReadonlyMap<string, readonly (string | undefined)[]>,
): { value: string; end: number } | undefined {
  const bare = /^\$([A-Za-z_]\w*)/.exec(text.slice(start));
  if (bare?.[1] !== undefined) return { value: scalars.get(bare[1]) ?? '', end: start + bare[0].length };
  const braced = /^\$\{([A-Za-z_]\w*)(?:\[(\d+)\])?(?:(:?[-+])([^}]*))?\}/.exec(text.slice(start));
  if (braced === null) return undefined;
  const [whole, name = '', index, operator, word = ''] = braced;
  const value = index === undefined ? scalars.get(name) : arrays.get(name)?.[Number(index)];
  const isSet = value !== undefined;
  const isNonEmpty = isSet && value !== '';
  const alternative = (): string => readWord(`"${word}"`, scalars, arrays);
  let result: string;
  switch (operator) {
    case undefined:
      result = value ?? '';
      break;
    case ':-':
      result = isNonEmpty ? value : alternative();
      break;
    case '-':
      result = isSet ? value : alternative();
      break;
    case ':+':
      result = isNonEmpty ? alternative() : '';
      break;
    default:
      result = isSet ? alternative() : '';
  }
  return { value: result, end: start + whole.length };
}
