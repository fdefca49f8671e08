import { parseArgs } from 'node:util';
import { UsageError } from './usage-error.ts';

export type OutputFormat = 'table' | 'json' | 'yaml';

/** Where to find the cluster, like kubectl: `--kubeconfig`, `--context`, `-n`, `-A`. */
export interface Target {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  /** undefined: the context's namespace (else "default"), as kubectl does. */
  readonly namespace: string | undefined;
  readonly allNamespaces: boolean;
}

export type CliCommand =
  | { readonly kind: 'help' }
  | { readonly kind: 'status'; readonly target: Target; readonly rollout: string | undefined; readonly watch: boolean; readonly output: OutputFormat; readonly width: number | undefined }
  | { readonly kind: 'why'; readonly target: Target; readonly node: string; readonly driver: string | undefined; readonly width: number | undefined }
  | { readonly kind: 'pause' | 'resume' | 'approve'; readonly target: Target; readonly rollout: string | undefined }
  | { readonly kind: 'retry' | 'skip' | 'unskip'; readonly target: Target; readonly node: string; readonly driver: string | undefined };

const OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  'all-namespaces': { type: 'boolean', short: 'A' },
  watch: { type: 'boolean', short: 'w' },
  output: { type: 'string', short: 'o' },
  driver: { type: 'string' },
  width: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type OptionName = keyof typeof OPTIONS;

/** Options each command accepts besides the target ones (--kubeconfig, --context, -n, -h). */
const COMMAND_OPTIONS: Readonly<Record<string, readonly OptionName[]>> = {
  status: ['all-namespaces', 'watch', 'output', 'width'],
  why: ['all-namespaces', 'driver', 'width'],
  pause: [],
  resume: [],
  approve: [],
  retry: ['all-namespaces', 'driver'],
  skip: ['all-namespaces', 'driver'],
  unskip: ['all-namespaces', 'driver'],
};
const TARGET_OPTIONS: readonly OptionName[] = ['kubeconfig', 'context', 'namespace', 'help'];

/** The command line (without `node` and the script), pure; throws UsageError on anything wrong. */
export function parseCliArgs(argv: readonly string[]): CliCommand {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; strict: true; allowPositionals: true; tokens: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: true, tokens: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error), { argv }, { cause: error });
  }
  const { values, positionals, tokens } = parsed;
  const [command, ...args] = positionals;
  if (values.help === true || command === undefined || command === 'help') return { kind: 'help' };
  const allowed = COMMAND_OPTIONS[command];
  if (allowed === undefined) throw new UsageError(`unknown command "${command}"`, { command });
  for (const t of tokens) {
    if (t.kind === 'option' && !isOneOf(t.name, allowed) && !isOneOf(t.name, TARGET_OPTIONS)) {
      throw new UsageError(`${command} does not take ${t.rawName}`, { command, option: t.rawName });
    }
  }
  if (values['all-namespaces'] === true && values.namespace !== undefined) throw new UsageError('-n and -A exclude each other', { command });
  const target: Target = {
    kubeconfig: values.kubeconfig,
    context: values.context,
    namespace: values.namespace,
    allNamespaces: values['all-namespaces'] === true,
  };
  const width = values.width === undefined ? undefined : parseWidth(values.width);
  switch (command) {
    case 'status':
      atMost(command, args, 1, 'ROLLOUT');
      return { kind: 'status', target, rollout: args[0], watch: values.watch === true, output: parseOutput(values.output), width };
    case 'why':
      return { kind: 'why', target, node: exactlyOne(command, args, 'NODE'), driver: values.driver, width };
    case 'pause':
    case 'resume':
    case 'approve':
      atMost(command, args, 1, 'ROLLOUT');
      return { kind: command, target, rollout: args[0] };
    default:
      return { kind: command as 'retry' | 'skip' | 'unskip', target, node: exactlyOne(command, args, 'NODE'), driver: values.driver };
  }
}

function parseOutput(value: string | undefined): OutputFormat {
  if (value === undefined) return 'table';
  if (value === 'json' || value === 'yaml') return value;
  throw new UsageError(`-o must be json or yaml, not "${value}"`, { output: value });
}

function parseWidth(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 20 || n > 1000) throw new UsageError(`--width must be a whole number of columns from 20 to 1000, not "${value}"`, { width: value });
  return n;
}

function exactlyOne(command: string, args: readonly string[], what: string): string {
  const [first] = args;
  if (first === undefined || args.length !== 1) throw new UsageError(`${command} takes exactly one ${what}`, { command, args });
  return first;
}

function atMost(command: string, args: readonly string[], n: number, what: string): void {
  if (args.length > n) throw new UsageError(`${command} takes at most ${n} ${what}, got ${args.length}: ${args.join(' ')}`, { command, args });
}

function isOneOf(name: string, options: readonly OptionName[]): boolean {
  return (options as readonly string[]).includes(name);
}
