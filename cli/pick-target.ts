import type { V1Node } from '@kubernetes/client-node';
import { DEFAULT_KEY_DOMAIN, parseUpgradeStateKey } from '../shared/keys.ts';
import { CliFailure } from './cli-failure.ts';
import type { RolloutObject } from './rollout-view.ts';

/** The rollout a pause/resume names, or the only one in the namespace. */
export function pickRollout(rollouts: readonly RolloutObject[], name: string | undefined, namespace: string): RolloutObject {
  if (name !== undefined) {
    const found = rollouts.find((r) => r.metadata?.name === name);
    if (found === undefined) throw new CliFailure(`DriverRollout "${name}" not found in namespace ${namespace}`);
    return found;
  }
  const [only] = rollouts;
  if (only === undefined) throw new CliFailure(`no DriverRollout in namespace ${namespace} (use -n NAMESPACE)`);
  if (rollouts.length > 1) throw new CliFailure(`namespace ${namespace} has ${rollouts.length} DriverRollouts (${names(rollouts)}): name one`);
  return only;
}

/** The driver (and its key domain) a node command acts for. */
export interface NodeDriver {
  readonly driver: string;
  readonly keyDomain: string;
}

/**
 * `--driver` when given; else the driver whose upgrade-state label the node carries among the
 * rollouts in scope; else the driver of the only rollout in scope (a node not labelled yet).
 */
export function pickNodeDriver(node: V1Node, rollouts: readonly RolloutObject[], driver: string | undefined): NodeDriver {
  const domainOf = (d: string): string => rollouts.find((r) => r.spec?.driverName === d)?.spec?.keyDomain ?? DEFAULT_KEY_DOMAIN;
  if (driver !== undefined) return { driver, keyDomain: domainOf(driver) };
  const nodeName = node.metadata?.name ?? '';
  const onNode = Object.keys(node.metadata?.labels ?? {})
    .map(parseUpgradeStateKey)
    .filter((k) => k !== undefined)
    .filter((k) => rollouts.some((r) => r.spec?.driverName === k.driver && (r.spec.keyDomain ?? DEFAULT_KEY_DOMAIN) === k.domain));
  const [first] = onNode;
  if (first !== undefined && onNode.length === 1) return { driver: first.driver, keyDomain: first.domain };
  if (onNode.length > 1) throw new CliFailure(`node ${nodeName} is managed for ${onNode.map((k) => k.driver).join(', ')}: pass --driver NAME`);
  const drivers = [...new Set(rollouts.map((r) => r.spec?.driverName ?? ''))];
  const [only] = drivers;
  if (only !== undefined && drivers.length === 1) return { driver: only, keyDomain: domainOf(only) };
  if (drivers.length === 0) throw new CliFailure(`no DriverRollout found for node ${nodeName}`);
  throw new CliFailure(`node ${nodeName} carries no upgrade-state label yet and several drivers are rolled out (${drivers.join(', ')}): pass --driver NAME`);
}

function names(rollouts: readonly RolloutObject[]): string {
  return rollouts.map((r) => r.metadata?.name ?? '').join(', ');
}
