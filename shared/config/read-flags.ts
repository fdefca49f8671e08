import type { ConfigProblem } from '../errors.ts';

/**
 * Reads `--name value` and `--name=value` for the given flags (names without `--`). Every
 * problem is reported, each named by what was written: an unknown flag (with its value, if one
 * follows), a flag without a value, a positional argument.
 */
export function readFlags(argv: readonly string[], known: readonly string[]): { readonly values: ReadonlyMap<string, string>; readonly problems: readonly ConfigProblem[] } {
  const flags = new Set(known);
  const values = new Map<string, string>();
  const problems: ConfigProblem[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const written = eq === -1 ? arg : arg.slice(0, eq);
    if (!written.startsWith('--')) {
      problems.push({ path: arg, message: 'unexpected argument: settings are flags such as --name=<value>' });
      continue;
    }
    const name = written.slice(2);
    if (!flags.has(name)) {
      problems.push({ path: written, message: `unknown flag; known flags: ${known.map((f) => `--${f}`).join(', ')}` });
      // Its value, if it has one, is part of the mistake, not an argument of its own.
      if (eq === -1 && argv[i + 1] !== undefined && !(argv[i + 1] ?? '').startsWith('--')) i += 1;
      continue;
    }
    if (eq !== -1) {
      values.set(name, arg.slice(eq + 1));
      continue;
    }
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) {
      problems.push({ path: written, message: 'needs a value' });
      continue;
    }
    values.set(name, next);
    i += 1;
  }
  return { values, problems };
}
