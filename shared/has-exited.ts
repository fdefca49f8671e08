import type { ChildProcess } from 'node:child_process';

/**
 * Whether `child` has exited: with a code, or killed by a signal (exitCode stays null then). A
 * process killed from outside (e.g. a SIGKILLed container of the demo's process kubelet) has
 * exited already: waiting for its 'exit' or 'close' would wait for an event that has come and gone.
 */
export function hasExited(child: Pick<ChildProcess, 'exitCode' | 'signalCode'>): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}
