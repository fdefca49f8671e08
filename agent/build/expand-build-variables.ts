import { BuildConfigError } from './build-errors.ts';

/** The per-node values a build variable may name. */
export interface BuildPlaceholders {
  /** `{kernel}`: the target kernel release (`uname -r`). */
  readonly kernel: string;
  /** `{kernelSource}`: the kernel source tree (Debian: linux-headers-<ver>-common). */
  readonly kernelSource: string;
  /** `{kernelOutput}`: the kernel build output tree with .config (Debian: linux-headers-<kver>). */
  readonly kernelOutput: string;
  /** `{arch}`: the machine (`uname -m`: x86_64, aarch64). */
  readonly arch: string;
  /** `{jobs}`: parallel make jobs. */
  readonly jobs: string;
  /** `{built:<package>}`: the kept build tree of an earlier DKMS package of the same driver. */
  readonly built?: Readonly<Record<string, string>>;
}

/** Placeholder names, for docs and errors. */
export const PLACEHOLDERS = ['kernel', 'kernelSource', 'kernelOutput', 'arch', 'jobs', 'built:<package>'] as const;

/**
 * Pure: replaces `{name}` in every value; `{{` and `}}` stand for literal braces. An unknown
 * placeholder, or `{built:x}` for a package not built before this one, is a BuildConfigError
 * naming the variable (`<field>.<NAME>`). Values keep their spaces: each is one make argument
 * or one environment variable, never split.
 */
export function expandBuildVariables(
  variables: Readonly<Record<string, string>>,
  placeholders: BuildPlaceholders,
  field: string,
): Record<string, string> {
  const expanded: Record<string, string> = {};
  for (const [name, template] of Object.entries(variables)) {
    expanded[name] = expandTemplate(template, placeholders, `${field}.${name}`);
  }
  return expanded;
}

/** Pure: one template (see expandBuildVariables); `field` names it in errors. */
export function expandTemplate(template: string, placeholders: BuildPlaceholders, field: string): string {
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (whole, name: string | undefined) => {
    if (whole === '{{') return '{';
    if (whole === '}}') return '}';
    const key = name ?? '';
    if (key.startsWith('built:')) {
      const dir = placeholders.built?.[key.slice('built:'.length)];
      if (dir === undefined) {
        throw new BuildConfigError(`${field}: {${key}} names no DKMS package built before this one`, { field, placeholder: key, built: Object.keys(placeholders.built ?? {}) });
      }
      return dir;
    }
    switch (key) {
      case 'kernel':
      case 'kernelSource':
      case 'kernelOutput':
      case 'arch':
      case 'jobs':
        return placeholders[key];
      default:
        throw new BuildConfigError(`${field}: unknown placeholder {${key}} (known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}; write {{ for a literal brace)`, {
          field,
          placeholder: key,
        });
    }
  });
}

/** Pure: `uname -m` for a Node.js `process.arch`. */
export function machineOf(nodeArch: string): string {
  const machines: Readonly<Record<string, string>> = { x64: 'x86_64', arm64: 'aarch64', ppc64: 'ppc64le', s390x: 's390x', ia32: 'i686', arm: 'armv7l' };
  return machines[nodeArch] ?? nodeArch;
}
