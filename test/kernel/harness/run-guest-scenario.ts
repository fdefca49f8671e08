import { realpathSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Scenario, ScenarioOutcome, ScenarioReport } from '../guest/scenario.ts';
import type { Guest } from './boot-guest.ts';
import { defaultCacheDir } from './build-initramfs.ts';
import { isReadable } from './is-readable.ts';
import { KernelTestBedError } from './kernel-test-bed-error.ts';

const REPO_ROOT = join(import.meta.dirname, '..', '..', '..');
const SCENARIO_SCRIPT = join(REPO_ROOT, 'test', 'kernel', 'guest', 'run-scenario.ts');

/**
 * Node's compile cache for the guest, kept on the host across boots: compiling the agent's
 * imports (execa, pino, ...) under emulation costs seconds. V8 checks each entry against the
 * source and its own version and flags, so a stale entry is only a miss.
 * Boot the guest with it in `writableDirs` to keep it; without, it lives in guest memory.
 */
export const GUEST_NODE_COMPILE_CACHE = join(defaultCacheDir(), 'guest-node-compile-cache');

/**
 * The project's Node 24 binary, not the npm shim: the guest runs it directly from the host's
 * root (node_modules/.bin/node is a symlink into the `node` package).
 */
export function projectNode(): string {
  return realpathSync(join(REPO_ROOT, 'node_modules', '.bin', 'node'));
}

/** guest/run-scenario.ts serving one guest, and the number of the last scenario handed to it. */
interface ScenarioServer {
  readonly dir: string;
  count: number;
}

const servers = new WeakMap<Guest, ScenarioServer>();

/**
 * Runs `scenario` in the guest's scenario server (guest/run-scenario.ts, started on first use,
 * one Node process per guest) and returns its report, the wall time from handing it over to
 * its result, and the agent's log for it. Fails with the server's output when the server fails
 * or dies, or past `timeoutMs`; a refusal by the agent is a result, not a failure.
 */
export async function runGuestScenario(
  guest: Guest,
  scenario: Scenario,
  options: { readonly timeoutMs?: number } = {},
): Promise<ScenarioReport & { readonly wallMs: number; readonly agentLog: string }> {
  const server = servers.get(guest) ?? (await startServer(guest));
  const n = ++server.count;
  const request = join(server.dir, `${n}.json`);
  const result = join(server.dir, `${n}.result.json`);
  const started = performance.now();
  await writeFile(`${request}.tmp`, JSON.stringify(scenario));
  await rename(`${request}.tmp`, request);
  const deadline = started + (options.timeoutMs ?? 120_000);
  while (!(await isReadable(result))) {
    const exit = await readFile(join(server.dir, 'server.exit'), 'utf8').catch(() => undefined);
    if (exit !== undefined) throw await serverError(server, `the guest's scenario server exited (${exit.trim()}) before scenario ${n} ended`);
    if (performance.now() > deadline) throw await serverError(server, `scenario ${n} did not end within ${(options.timeoutMs ?? 120_000) / 1000}s`);
    await sleep(25);
  }
  const wallMs = Math.round(performance.now() - started);
  const outcome = JSON.parse(await readFile(result, 'utf8')) as ScenarioOutcome;
  const agentLog = await readFile(join(server.dir, `${n}.log`), 'utf8').catch(() => '');
  if ('failure' in outcome) throw new KernelTestBedError(`guest scenario ${n} failed: ${outcome.failure}\n--- agent log ---\n${agentLog.slice(-4_000)}`, { n });
  return { ...outcome.report, wallMs, agentLog };
}

/** Starts the server in the background of the guest; its output and exit status land in its dir. */
async function startServer(guest: Guest): Promise<ScenarioServer> {
  const server = { dir: join(guest.workDir, 'scenarios'), count: 0 };
  await mkdir(server.dir);
  const [node, script, dir, out, exit] = [projectNode(), SCENARIO_SCRIPT, server.dir, join(server.dir, 'server.out'), join(server.dir, 'server.exit')].map(shellQuote);
  const start = await guest.run(
    `cd ${shellQuote(REPO_ROOT)} && (NODE_COMPILE_CACHE=${shellQuote(GUEST_NODE_COMPILE_CACHE)} ${node} ${script} ${dir} >${out} 2>&1 </dev/null; echo "exit code $?" >${exit}) >/dev/null 2>&1 </dev/null &`,
  );
  if (start.exitCode !== 0) throw new KernelTestBedError(`could not start the guest's scenario server: ${start.stderr}`, { dir: server.dir });
  servers.set(guest, server);
  return server;
}

async function serverError(server: ScenarioServer, message: string): Promise<KernelTestBedError> {
  const out = await readFile(join(server.dir, 'server.out'), 'utf8').catch(() => '');
  return new KernelTestBedError(`${message}\n--- server output ---\n${out.slice(-4_000)}`, { dir: server.dir });
}

/** One POSIX sh word. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
