import { realpathSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Scenario, ScenarioReport } from '../guest/run-scenario.ts';
import type { Guest } from './boot-guest.ts';
import { defaultCacheDir } from './build-initramfs.ts';
import { KernelTestBedError } from './kernel-test-bed-error.ts';

const REPO_ROOT = join(import.meta.dirname, '..', '..', '..');
const SCENARIO_SCRIPT = join(REPO_ROOT, 'test', 'kernel', 'guest', 'run-scenario.ts');

/**
 * The project's Node 24 binary, not the npm shim: the guest runs it directly from the host's
 * root (node_modules/.bin/node is a symlink into the `node` package).
 */
export function projectNode(): string {
  return realpathSync(join(REPO_ROOT, 'node_modules', '.bin', 'node'));
}

/**
 * Node's compile cache for the guest, kept on the host across boots: compiling the agent's
 * imports (execa, pino, ...) under emulation costs seconds per process. V8 checks each entry
 * against the source and its own version and flags, so a stale entry is only a miss.
 * Boot the guest with it in `writableDirs` to keep it; without, it lives in guest memory.
 */
export const GUEST_NODE_COMPILE_CACHE = join(defaultCacheDir(), 'guest-node-compile-cache');

let scenarioCount = 0;

/**
 * Runs guest/run-scenario.ts in the guest on `scenario` and returns its report, plus the wall
 * time of the whole guest command (Node's start-up included). Fails with the agent's stderr
 * when the script itself fails (a refusal by the agent is a result, not a failure).
 */
export async function runGuestScenario(
  guest: Guest,
  scenario: Scenario,
  options: { readonly timeoutMs?: number } = {},
): Promise<ScenarioReport & { readonly wallMs: number; readonly agentLog: string }> {
  const file = join(guest.workDir, `scenario-${++scenarioCount}.json`);
  await writeFile(file, JSON.stringify(scenario));
  const command = `cd ${shellQuote(REPO_ROOT)} && NODE_COMPILE_CACHE=${shellQuote(GUEST_NODE_COMPILE_CACHE)} exec ${[projectNode(), SCENARIO_SCRIPT, file].map(shellQuote).join(' ')}`;
  const run = await guest.run(command, options);
  if (run.exitCode !== 0) {
    throw new KernelTestBedError(`guest scenario script exited ${run.exitCode}: ${run.stderr.slice(-4_000)}`, { file, stdout: run.stdout });
  }
  return { ...(JSON.parse(run.stdout) as ScenarioReport), wallMs: Math.round(run.durationMs), agentLog: run.stderr };
}

/** One POSIX sh word. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
