/**
 * Several DriverRollouts may work on one node (a GPU driver and a NIC driver on the same
 * machines). Each cordons for its own upgrade; none may uncordon while another still needs the
 * node cordoned, or mistake another's cordon for an admin's. Other drivers are seen through
 * their state labels (`<domain>/<driver>-driver-upgrade-state`, any domain).
 */
import { driverKeys, isUpgradeState, parseUpgradeStateKey, type DriverKeys } from '../../shared/keys.ts';
import { isUpgrading } from './pool-capacity.ts';

export interface OtherDriverHold {
  readonly driver: string;
  readonly state: string;
  /** That driver recorded the node as cordoned by an admin before its upgrade. */
  readonly cordonedByAdmin: boolean;
}

/** Other drivers whose upgrade keeps the node cordoned: upgrading (cordon-required … validation-required) or upgrade-failed. */
export function otherDriverHolds(labels: Readonly<Record<string, string>>, annotations: Readonly<Record<string, string>>, keys: DriverKeys): OtherDriverHold[] {
  const holds: OtherDriverHold[] = [];
  for (const key in labels) {
    if (key === keys.upgradeState || !Object.hasOwn(labels, key)) continue;
    const state = labels[key] ?? '';
    const owner = parseUpgradeStateKey(key);
    if (owner === undefined || !isUpgradeState(state) || !(isUpgrading(state) || state === 'upgrade-failed')) continue;
    const { domain, driver } = owner;
    const other = driverKeys(driver, domain);
    holds.push({ driver: `${domain}/${driver}`, state, cordonedByAdmin: annotations[other.initialStateUnschedulable] !== undefined });
  }
  return holds;
}

/**
 * Whether a cordoned node was cordoned by an admin, as this driver starts its upgrade: not when
 * another driver's unfinished upgrade cordoned it (that driver did not mark it as an admin's);
 * yes when every such driver marked it as an admin's, or none is upgrading.
 */
export function isCordonedByAdmin(unschedulable: boolean, holds: readonly OtherDriverHold[]): boolean {
  return unschedulable && holds.every((h) => h.cordonedByAdmin);
}
