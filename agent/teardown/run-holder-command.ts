import { execa } from 'execa';
import type { HolderCommand } from './holder-command.ts';
import { HolderCommandError, type HolderPhase } from './teardown-errors.ts';

/** Enters every namespace of the host's init process: the pod must run with hostPID. */
export const HOST_NAMESPACES_PREFIX: readonly string[] = ['nsenter', '--target', '1', '--mount', '--uts', '--ipc', '--net', '--pid', '--'];

/** Pure: the argv a holder's command runs as: behind `hostPrefix` for a host daemon, as is in the image. */
export function holderArgv(holder: HolderCommand, command: readonly string[], hostPrefix: readonly string[]): readonly string[] {
  return holder.on === 'host' ? [...hostPrefix, ...command] : command;
}

/**
 * Runs one command of a holder, killed (SIGKILL) after the holder's timeout. Resolves true when
 * it exited 0; for `check`, false when it exited non-zero (the holder is not running); for `stop`
 * and `start`, a non-zero exit or the timeout is a HolderCommandError.
 */
export async function runHolderCommand(holder: HolderCommand, phase: HolderPhase, hostPrefix: readonly string[]): Promise<boolean> {
  const command = phase === 'check' ? (holder.check ?? []) : phase === 'stop' ? holder.stop : holder.start;
  const [file, ...args] = holderArgv(holder, command, hostPrefix);
  if (file === undefined) return true;
  const result = await execa(file, args, { all: true, reject: false, timeout: holder.timeoutMs, killSignal: 'SIGKILL', stdin: 'ignore' });
  if (result.exitCode === 0 && !result.timedOut) return true;
  if (phase === 'check' && !result.timedOut && result.exitCode !== undefined) return false;
  throw new HolderCommandError(
    { holder: holder.name, phase, command: command.join(' '), exitCode: result.exitCode, timedOut: result.timedOut, timeoutMs: holder.timeoutMs, output: result.all || (result.exitCode === undefined && !result.timedOut ? (result.shortMessage ?? '') : '') },
    result.timedOut ? undefined : { cause: result.cause },
  );
}
