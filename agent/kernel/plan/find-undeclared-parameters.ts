import type { ConfigProblem } from '../../../shared/errors.ts';
import { sysfsModuleName } from '../../../shared/kmod/loaded-module.ts';
import type { ModuleFile } from '../kernel-port.ts';
import type { ModuleParameters } from './modprobe-config.ts';

/**
 * Parameters the kernel's module loader accepts for every module (kernel/module/main.c:
 * unknown_module_param_cb), whatever the module declares.
 */
const PARAMETERS_OF_EVERY_MODULE = new Set(['dyndbg', 'async_probe']);

/**
 * Configured parameters that the built module does not declare. The kernel does not refuse them:
 * init_module logs "unknown parameter 'x' ignored" and loads the module, so modprobe exits 0 and a
 * misspelt option would run unnoticed (seen on Debian 6.1 under QEMU, test/kernel). Modules that
 * are not part of the build, and built modules whose declared parameters are not known (cache
 * entries from before they were recorded), are not checked.
 */
export function findUndeclaredParameters(built: readonly ModuleFile[], parameters: ModuleParameters): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const [module, values] of Object.entries(parameters)) {
    const declared = built.find((m) => m.name === sysfsModuleName(module))?.parameters;
    if (declared === undefined) continue;
    for (const name of Object.keys(values)) {
      if (declared.includes(name) || PARAMETERS_OF_EVERY_MODULE.has(name)) continue;
      const known = declared.length === 0 ? 'it declares none' : `it declares ${declared.join(', ')}`;
      problems.push({ path: `parameters.${module}.${name}`, message: `${module} has no parameter ${name} (${known}); the kernel would ignore it` });
    }
  }
  return problems;
}
