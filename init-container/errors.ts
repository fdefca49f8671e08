import { DriverRolloutError } from '../shared/errors.ts';
import type { ModuleInUse } from '../shared/kmod/find-module-users.ts';
import { describeModulesInUse } from '../shared/kmod/find-module-users.ts';

/** What the API server refused or could not find; `verb` and `resource` name the missing permission. */
export type NodeAccessProblem = 'forbidden' | 'unauthorized' | 'not-found' | 'invalid';

/**
 * A request about our own Node failed in a way retrying cannot fix: RBAC or the admission policy
 * denied it (403), the credentials were rejected (401), the Node does not exist (404) or the
 * request itself is invalid (400/422). The message names the node, the verb and the resource.
 */
export class NodeAccessError extends DriverRolloutError {
  readonly problem: NodeAccessProblem;

  constructor(
    fields: { node: string; verb: string; resource: string; problem: NodeAccessProblem; status: number | undefined; reason: string },
    cause?: unknown,
  ) {
    super(describeNodeAccess(fields), fields, { cause });
    this.problem = fields.problem;
  }
}

function describeNodeAccess(f: { node: string; verb: string; resource: string; problem: NodeAccessProblem; reason: string }): string {
  switch (f.problem) {
    case 'forbidden':
      return `not allowed to ${f.verb} ${f.resource} "${f.node}": grant the driver service account "${f.verb}" on "${f.resource}" (manifests/driver-rbac.yaml) and check the safe-load admission policy: ${f.reason}`;
    case 'unauthorized':
      return `credentials rejected while trying to ${f.verb} ${f.resource} "${f.node}": ${f.reason}`;
    case 'not-found':
      return `node "${f.node}" not found (${f.verb} ${f.resource}): is NODE_NAME set from the downward API (spec.nodeName)? ${f.reason}`;
    case 'invalid':
      return `the API server rejected ${f.verb} ${f.resource} "${f.node}" as invalid: ${f.reason}`;
  }
}

/** The node object went away while we waited for it (deleted): the pod is about to go too. */
export class NodeDeletedError extends DriverRolloutError {
  constructor(node: string) {
    super(`node "${node}" was deleted while waiting for safe load`, { node });
  }
}

/** Waiting ended because of SIGTERM/SIGINT or the overall timeout; `cause` is the abort reason. */
export class GateAbortedError extends DriverRolloutError {
  constructor(message: string, fields: Readonly<Record<string, unknown>>, cause: unknown) {
    super(message, fields, { cause });
  }
}

/**
 * The pre-flight check gave up while modules to be replaced still had users outside the kernel
 * (refcnt > holders): loading the new driver now would fail or pull the device from under them.
 */
export class ModulesInUseError extends DriverRolloutError {
  readonly inUse: readonly ModuleInUse[];

  constructor(inUse: readonly ModuleInUse[], cause: unknown) {
    super(`driver is in use: ${describeModulesInUse(inUse)}`, { modules: inUse }, { cause });
    this.inUse = inUse;
  }
}

/** Why a signal was aborted, as set by main.ts: a termination signal or the overall timeout. */
export class StopRequested extends DriverRolloutError {
  readonly kind: 'signal' | 'timeout';

  constructor(kind: 'signal' | 'timeout', message: string, fields: Readonly<Record<string, unknown>> = {}) {
    super(message, { kind, ...fields });
    this.kind = kind;
  }
}
