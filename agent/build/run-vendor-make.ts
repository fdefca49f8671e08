import { glob } from 'node:fs/promises';
import { join } from 'node:path';
import { BuildOutputError } from './build-errors.ts';
import type { MakeRecipe } from './build-recipe.ts';
import { expandBuildVariables, type BuildPlaceholders } from './expand-build-variables.ts';
import { runBuildCommand } from './run-build-command.ts';

export interface VendorMakeRequest {
  readonly recipe: MakeRecipe;
  /** The writable copy of the driver sources. */
  readonly sourceDir: string;
  readonly placeholders: BuildPlaceholders;
  readonly kernelVersion: string;
  readonly jobs: number;
  /** HOME of the build (a scratch directory). */
  readonly home: string;
  /** Lowest CPU and I/O priority (see runBuildCommand). */
  readonly background?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

/**
 * The vendor's own Makefile: `make -C <source>/<directory> -j<jobs> NAME=value... <targets>` with
 * an explicit environment, then the .ko files matching the recipe's `modules` glob (relative to
 * the source), sorted by path. BuildOutputError when nothing matches.
 */
export async function runVendorMake(request: VendorMakeRequest): Promise<string[]> {
  const { recipe } = request;
  const variables = expandBuildVariables(recipe.variables, request.placeholders, 'build-recipe.variables');
  await runBuildCommand({
    command: 'make',
    args: ['-C', join(request.sourceDir, recipe.directory), `-j${request.jobs}`, ...Object.entries(variables).map(([n, v]) => `${n}=${v}`), ...recipe.targets],
    home: request.home,
    kernelVersion: request.kernelVersion,
    background: request.background, signal: request.signal,
  });
  const files: string[] = [];
  for await (const path of glob(recipe.modules, { cwd: request.sourceDir })) files.push(path);
  if (files.length === 0) {
    throw new BuildOutputError(`make ${recipe.targets.join(' ')} succeeded but no file matches build-recipe.modules "${recipe.modules}"`, {
      modules: recipe.modules,
      sourceDir: request.sourceDir,
    });
  }
  return files.sort().map((f) => join(request.sourceDir, f));
}
