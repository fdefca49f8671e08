import { isAbsolute, normalize } from 'node:path';
import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';

/**
 * How a driver's sources become modules. Values of `variables` are templates with per-node
 * placeholders ({kernel}, {kernelSource}, {kernelOutput}, {arch}, {jobs}; see
 * expand-build-variables.ts) and may hold spaces: each is one make argument or one environment
 * variable. Everything here is part of the build's cache key.
 */
export type BuildRecipe = KbuildRecipe | MakeRecipe | DkmsRecipe;

/** `make -C <kernelOutput> M=<source> NAME=value... modules`: a plain kbuild tree. Modules from modules.order. */
export interface KbuildRecipe {
  readonly kind: 'kbuild';
  readonly variables: Readonly<Record<string, string>>;
}

/**
 * The vendor's own Makefile: `make -C <source>/<directory> NAME=value... <targets>` (NVIDIA:
 * `modules SYSSRC={kernelSource} SYSOUT={kernelOutput}`), then the .ko files matching `modules`
 * (a glob relative to the source, e.g. `kernel-open/*.ko`), in name order.
 */
export interface MakeRecipe {
  readonly kind: 'make';
  readonly directory: string;
  readonly targets: readonly string[];
  readonly variables: Readonly<Record<string, string>>;
  readonly modules: string;
}

/**
 * Real `dkms add` / `dkms build -k <kernel>` in private trees, one package after another (a
 * directory with a dkms.conf, relative to the source). `variables` go into dkms's environment
 * (and so into its PRE_BUILD scripts and make); `{built:<package>}` names the kept build tree of an
 * earlier package (its headers and Module.symvers), which is also passed to later packages' kbuild
 * as KBUILD_EXTRA_SYMBOLS. Modules are the BUILT_MODULE_* records of every package's dkms.conf.
 */
export interface DkmsRecipe {
  readonly kind: 'dkms';
  readonly packages: readonly DkmsPackage[];
}

export interface DkmsPackage {
  readonly directory: string;
  readonly variables: Readonly<Record<string, string>>;
}

/** The recipe when none is configured: today's kbuild call, with the legacy MAKE_VARIABLES. */
export function defaultRecipe(makeVariables: Readonly<Record<string, string>>): KbuildRecipe {
  return { kind: 'kbuild', variables: makeVariables };
}

const variableName = /^[A-Za-z_][A-Za-z0-9_]*$/;
const variables = z.record(z.string().regex(variableName, 'variable names are NAME (letters, digits, _)'), z.string()).default({});
const relativePath = z
  .string()
  .min(1)
  .refine((p) => !isAbsolute(p) && !normalize(p).startsWith('..'), 'must be a path inside the driver source');

const recipeSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('kbuild'), variables }).strict(),
  z
    .object({
      kind: z.literal('make'),
      directory: relativePath.default('.'),
      targets: z.array(z.string().regex(/^[\w.+-]+$/, 'a make target name')).min(1).default(['modules']),
      variables,
      modules: relativePath.default('**/*.ko'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('dkms'),
      packages: z.array(z.object({ directory: relativePath, variables }).strict()).min(1),
    })
    .strict(),
]);

export type ParsedRecipe = { readonly ok: true; readonly recipe: BuildRecipe } | { readonly ok: false; readonly problems: readonly ConfigProblem[] };

/**
 * Pure: a recipe from its JSON text (the `--build-recipe` flag / BUILD_RECIPE variable), e.g.
 * `{"kind":"make","variables":{"SYSSRC":"{kernelSource}","SYSOUT":"{kernelOutput}"},"modules":"kernel-open/*.ko"}`.
 * Every problem is named by its path under `field` (`build-recipe.packages[1].directory`).
 */
export function parseBuildRecipe(text: string, field: string): ParsedRecipe {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, problems: [{ path: field, message: `not JSON: ${error instanceof Error ? error.message : String(error)}` }] };
  }
  const parsed = recipeSchema.safeParse(json);
  if (!parsed.success) {
    return { ok: false, problems: parsed.error.issues.map((issue) => ({ path: pathOf(field, issue.path), message: issue.message })) };
  }
  const recipe = parsed.data;
  if (recipe.kind === 'dkms') {
    const seen = new Set<string>();
    for (const [i, p] of recipe.packages.entries()) {
      const dir = normalize(p.directory);
      if (seen.has(dir)) return { ok: false, problems: [{ path: `${field}.packages[${i}].directory`, message: `${p.directory} is listed twice` }] };
      seen.add(dir);
    }
  }
  return { ok: true, recipe };
}

function pathOf(field: string, path: readonly PropertyKey[]): string {
  let out = field;
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `.${String(part)}`;
  return out;
}
