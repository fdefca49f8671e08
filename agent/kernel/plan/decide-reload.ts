import type { LoadedModule } from '../../../shared/kmod/loaded-module.ts';
import type { ModuleParameters } from './modprobe-config.ts';
import type { ModuleFile } from '../kernel-port.ts';

export type ReloadDecision =
  /** The built modules are what is loaded: nothing to do. */
  | { readonly kind: 'fast-path' }
  | { readonly kind: 'load'; readonly reason: string };

/**
 * Whether loading `built` would change anything. Skipped (fast path) only when every module to
 * load is loaded with the built srcversion, no other built module is loaded with another one,
 * and no configured parameter that /sys/module shows differs. A module without srcversion
 * (no MODULE_VERSION) cannot be compared, so it is always reloaded.
 */
export function decideReload(
  built: readonly ModuleFile[],
  toLoad: readonly string[],
  loaded: ReadonlyMap<string, LoadedModule>,
  parameters: ModuleParameters,
): ReloadDecision {
  const reasons: string[] = [];
  for (const file of built) {
    const live = loaded.get(file.name);
    if (live === undefined) {
      if (toLoad.includes(file.name)) reasons.push(`${file.name} is not loaded`);
      continue;
    }
    if (file.srcversion === undefined || live.srcversion === undefined) {
      reasons.push(`${file.name} has no srcversion to compare`);
    } else if (live.srcversion !== file.srcversion) {
      reasons.push(`${file.name} srcversion ${live.srcversion} is loaded, ${file.srcversion} is built`);
    }
    for (const [parameter, wanted] of Object.entries(parameters[file.name] ?? {})) {
      const current = live.parameters[parameter];
      if (current !== undefined && !isSameParameterValue(current, wanted)) {
        reasons.push(`${file.name} parameter ${parameter} is ${current}, configured ${wanted}`);
      }
    }
  }
  return reasons.length === 0 ? { kind: 'fast-path' } : { kind: 'load', reason: reasons.join('; ') };
}

/**
 * Whether the value /sys/module shows is the one `configured` sets. The kernel keeps a parameter
 * in its type and shows it in its own spelling, whatever modprobe passed: a bool as Y/N (kstrtobool
 * reads the first letter: yes, true, 1, on...), an integer in decimal (kstrtoint with base 0 takes
 * 0x31 and 061 for 49), arrays comma-separated. Seen on Debian 6.1 under QEMU (test/kernel):
 * polynomial=0x31 verbose=yes show as 49 and Y, and comparing spellings reloaded forever.
 * Without the parameter's type, a string parameter whose old and new values are one number
 * spelled twice ("49" then "0x31") counts as unchanged.
 */
export function isSameParameterValue(sysfsValue: string, configured: string): boolean {
  if (sysfsValue === configured) return true;
  const shown = sysfsValue.split(',');
  const asked = configured.split(',');
  return shown.length === asked.length && shown.every((value, i) => isSameScalar(value, asked[i] ?? ''));
}

function isSameScalar(shown: string, asked: string): boolean {
  if (shown === asked) return true;
  if (shown === 'Y' || shown === 'N') return kernelBool(asked) === (shown === 'Y');
  const number = kernelInteger(shown);
  return number !== undefined && number === kernelInteger(asked);
}

/** lib/kstrtox.c kstrtobool: the first letter decides; "on"/"off" by the second. */
function kernelBool(text: string): boolean | undefined {
  const first = text.charAt(0);
  if ('yYtT1'.includes(first) && first !== '') return true;
  if ('nNfF0'.includes(first) && first !== '') return false;
  if (first === 'o' || first === 'O') {
    const second = text.charAt(1).toLowerCase();
    if (second === 'n') return true;
    if (second === 'f') return false;
  }
  return undefined;
}

/** lib/kstrtox.c with base 0: an optional sign, then 0x/0X hex, 0 octal, or decimal. */
function kernelInteger(text: string): bigint | undefined {
  const match = /^([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$/.exec(text);
  const digits = match?.[2];
  if (digits === undefined) return undefined;
  const value = /^0[xX]/.test(digits) ? BigInt(digits) : /^0[0-7]/.test(digits) ? BigInt(`0o${digits.slice(1)}`) : BigInt(digits);
  return match?.[1] === '-' ? -value : value;
}
