import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';
import type { DriverSource } from '../build/build-driver.ts';
import { defaultRecipe, parseBuildRecipe, type BuildRecipe } from '../build/build-recipe.ts';
import { absolutePathList, optional, problem, required, seconds, splitList } from './flag-fields.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/** What to compile, against which kernel, and where the results are kept. */
export interface BuildConfig {
  /** Version of the driver sources; labelled on the node once loaded. */
  readonly driverVersion: string;
  readonly source: DriverSource;
  /** Build and load for this kernel instead of `uname -r`. */
  readonly kernelVersion: string | undefined;
  /**
   * kbuild trees to try, `{kernel}` standing for the target kernel release (e.g.
   * `/host/usr/src/linux-headers-{kernel}`); undefined: `/lib/modules/<kver>/build`, then
   * `/usr/src/linux-headers-<kver>`.
   */
  readonly headersDirs: readonly string[] | undefined;
  /**
   * How to build: `--build-recipe` / BUILD_RECIPE as JSON (kbuild, make or dkms; see
   * agent/build/build-recipe.ts), else kbuild with `--make-variables` (NAME=value items, no spaces).
   */
  readonly recipe: BuildRecipe;
  /**
   * Module.symvers files of other drivers this one builds against (MOFED's for nvidia-peermem),
   * by absolute path: their contents join the cache key, so a new MOFED build rebuilds this driver.
   */
  readonly dependencySymvers: readonly string[];
  /** Modules shipped ready-built in the image, one directory per kernel release (KMM layout); used when the running kernel's exists. */
  readonly prebuiltDir: string | undefined;
  readonly signing: { readonly privateKeyPath: string; readonly certificatePath: string } | undefined;
  readonly cacheDir: string;
  /**
   * The next-kernel preflight: once the driver is loaded, build it in the background (nice,
   * ionice idle) for every other kernel with installed headers, into the same cache, and report.
   */
  readonly nextKernelPreflight: boolean;
  /** How often the preflight looks again for kernels (cached ones cost a lookup only). */
  readonly nextKernelIntervalMs: number;
}

export const buildFlags = {
  'driver-version': required,
  'driver-source-dir': optional,
  'driver-source-url': z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  'driver-source-sha256': z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lower-case hex digits').optional(),
  'driver-source-strip-components': z.coerce.number().int().min(0).optional(),
  'kernel-version': optional,
  'cache-dir': z.string().default('/var/lib/driver-rollout/cache'),
  'headers-dirs': optional,
  'make-variables': optional,
  'build-recipe': optional,
  'prebuilt-modules-dir': optional,
  'dependency-symvers': optional,
  'signing-key': optional,
  'signing-cert': optional,
  'next-kernel-preflight': z.stringbool().default(true),
  'next-kernel-interval-seconds': seconds.default(3600),
};

export function buildConfig(c: RawAgentConfig, problems: ConfigProblem[]): BuildConfig {
  return {
    driverVersion: c['driver-version'],
    source: driverSource(c, problems),
    kernelVersion: c['kernel-version'],
    headersDirs: c['headers-dirs'] === undefined ? undefined : splitList(c['headers-dirs']),
    recipe: recipe(c, problems),
    prebuiltDir: c['prebuilt-modules-dir'],
    dependencySymvers: absolutePathList(c['dependency-symvers'], 'dependency-symvers', problems),
    signing: signing(c, problems),
    cacheDir: c['cache-dir'],
    nextKernelPreflight: c['next-kernel-preflight'],
    nextKernelIntervalMs: c['next-kernel-interval-seconds'] * 1000,
  };
}

function driverSource(c: RawAgentConfig, problems: ConfigProblem[]): DriverSource {
  const dir = c['driver-source-dir'];
  const url = c['driver-source-url'];
  const sha256 = c['driver-source-sha256'];
  if (dir !== undefined && url !== undefined) {
    problems.push(problem('driver-source-dir', 'give either a source directory or a tarball URL, not both'));
  }
  if (url !== undefined) {
    if (sha256 === undefined) problems.push(problem('driver-source-sha256', 'required with --driver-source-url: downloads are verified'));
    const strip = c['driver-source-strip-components'];
    return { kind: 'tarball', url, sha256: sha256 ?? '', ...(strip === undefined ? {} : { stripComponents: strip }) };
  }
  if (dir === undefined) {
    problems.push(problem('driver-source-dir', 'required: a kbuild source directory, or --driver-source-url with --driver-source-sha256'));
  }
  return { kind: 'directory', path: dir ?? '' };
}

function recipe(c: RawAgentConfig, problems: ConfigProblem[]): BuildRecipe {
  const makeVariables = keyValues(c['make-variables'], 'make-variables', problems);
  const text = c['build-recipe'];
  if (text === undefined) return defaultRecipe(makeVariables);
  if (c['make-variables'] !== undefined) problems.push(problem('make-variables', 'give the variables in --build-recipe (its "variables"), not both'));
  const parsed = parseBuildRecipe(text, 'build-recipe');
  if (parsed.ok) return parsed.recipe;
  for (const p of parsed.problems) problems.push(problem('build-recipe', `${p.path}: ${p.message}`));
  return defaultRecipe({});
}

function keyValues(text: string | undefined, field: 'make-variables', problems: ConfigProblem[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of splitList(text ?? '')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(item);
    if (m?.[1] === undefined || m[2] === undefined) {
      problems.push(problem(field, `"${item}" is not NAME=value`));
      continue;
    }
    out[m[1]] = m[2];
  }
  return out;
}

function signing(c: RawAgentConfig, problems: ConfigProblem[]): BuildConfig['signing'] {
  const privateKeyPath = c['signing-key'];
  const certificatePath = c['signing-cert'];
  if (privateKeyPath === undefined && certificatePath === undefined) return undefined;
  if (privateKeyPath === undefined || certificatePath === undefined) {
    problems.push(problem(privateKeyPath === undefined ? 'signing-key' : 'signing-cert', 'module signing needs both the key and the certificate'));
    return undefined;
  }
  return { privateKeyPath, certificatePath };
}
