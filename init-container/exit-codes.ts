/**
 * The init container's exit codes: its contract with the kubelet and with operators reading
 * `kubectl describe pod` (Last State: Terminated, Exit Code). Each code but `ok` has an entry in
 * docs/runbook.md (test/unit/docs/runbook.test.ts).
 */
export const EXIT_CODES = {
  /** Safe to load (or safe load disabled). */
  ok: 0,
  /** Node not found, access denied, node deleted, unexpected error. */
  failed: 1,
  /** Bad configuration (every problem listed; nothing was changed). */
  config: 2,
  /** WAIT_TIMEOUT_SECONDS passed while waiting for the annotation to clear. */
  timeout: 3,
  /** Pre-flight refused: modules still in use when the timeout (or SIGTERM) ended the wait. */
  modulesInUse: 4,
} as const;

/** Stopped on request: 128 + the signal's number, as a shell reports it. */
export const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;
