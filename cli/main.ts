/**
 * kubectl-driver_rollout: the kubectl plugin (`kubectl driver-rollout ...`). Parses the command
 * line and the environment once, loads the kubeconfig like kubectl, runs the command.
 * Exit status: 0 done, 1 failed (cluster refused, not found), 2 bad command line.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { parseCliArgs, type CliCommand, type Target } from './parse-cli-args.ts';
import { CliFailure } from './cli-failure.ts';
import { runCli } from './run-cli.ts';
import { UsageError } from './usage-error.ts';

function loadKubeConfig(target: Target): KubeConfig {
  const kc = new KubeConfig();
  // Without --kubeconfig: $KUBECONFIG (a list of files, merged) or ~/.kube/config, as kubectl.
  if (target.kubeconfig !== undefined) kc.loadFromFile(target.kubeconfig);
  else kc.loadFromDefault();
  if (target.context !== undefined) {
    if (kc.getContextObject(target.context) === null) throw new CliFailure(`context "${target.context}" does not exist in the kubeconfig`);
    kc.setCurrentContext(target.context);
  }
  if (kc.getCurrentCluster() === null) throw new CliFailure('no cluster in the kubeconfig (set --kubeconfig, KUBECONFIG or ~/.kube/config)');
  return kc;
}

function terminalWidth(): number {
  if (process.stdout.isTTY && process.stdout.columns > 0) return process.stdout.columns;
  const fromEnv = Number(process.env.COLUMNS);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : 80;
}

async function main(): Promise<number> {
  let command: CliCommand;
  try {
    command = parseCliArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`error: ${error.message}\nSee 'kubectl driver-rollout --help'.\n`);
    return 2;
  }
  const stop = new AbortController();
  process.once('SIGINT', () => {
    stop.abort();
  });
  process.once('SIGTERM', () => {
    stop.abort();
  });
  try {
    return await runCli(command, {
      kubeConfig: loadKubeConfig,
      write: (text) => process.stdout.write(text),
      writeError: (text) => process.stderr.write(text),
      width: terminalWidth(),
      isTerminal: process.stdout.isTTY,
      now: () => Date.now(),
      signal: stop.signal,
    });
  } catch (error) {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

process.exitCode = await main();
