import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { apiErrorMessage, apiStatusCode } from '../shared/kube/api-error.ts';
import { MERGE_PATCH } from '../shared/kube/patch-options.ts';
import { CANARY_APPROVED_BY_ANNOTATION, CANARY_APPROVED_REVISION_ANNOTATION, driverKeys } from '../shared/keys.ts';
import { buildWhyViews } from './build-why-views.ts';
import { HELP_TEXT } from './help-text.ts';
import type { CliCommand, Target } from './parse-cli-args.ts';
import { DRIVER_ROLLOUT_GROUP as GROUP, DRIVER_ROLLOUT_PLURAL as PLURAL, DRIVER_ROLLOUT_VERSION as VERSION } from '../coordinator/policy/driver-rollout-spec.ts';
import { ClusterReader, type Scope } from './read-cluster.ts';
import { renderStatus } from './render-status.ts';
import { renderWhy } from './render-why.ts';
import { CliFailure } from './cli-failure.ts';
import { pickNodeDriver, pickRollout } from './pick-target.ts';
import { buildRolloutViews, type RolloutObject, type RolloutView } from './rollout-view.ts';
import { watchStatus } from './watch-status.ts';

export interface CliIo {
  /** Loads the kubeconfig the target names (like kubectl), with its context selected. */
  readonly kubeConfig: (target: Target) => KubeConfig;
  readonly write: (text: string) => void;
  readonly writeError: (text: string) => void;
  /** Columns of the terminal (or $COLUMNS); 80 when unknown. */
  readonly width: number;
  /** True when output goes to a terminal: -w redraws in place. */
  readonly isTerminal: boolean;
  readonly now: () => number;
  readonly signal: AbortSignal;
}

/** Runs one parsed command; resolves with the exit status (0, or 1 for CliFailure / API errors). */
export async function runCli(command: CliCommand, io: CliIo): Promise<number> {
  if (command.kind === 'help') {
    io.write(HELP_TEXT);
    return 0;
  }
  try {
    const kc = io.kubeConfig(command.target);
    const reader = new ClusterReader(kc);
    const namespace = command.target.namespace ?? contextNamespace(kc);
    switch (command.kind) {
      case 'status':
        return await runStatus(command, namespace, reader, io);
      case 'why':
        return await runWhy(command, reader, io);
      case 'pause':
      case 'resume':
        return await pauseOrResume(command.kind, command.rollout, namespace, kc, reader, io);
      case 'approve':
        return await approve(command.rollout, namespace, kc, reader, io);
      case 'retry':
      case 'skip':
      case 'unskip':
        return await actOnNode(command.kind, command.node, command.driver, await reader.listRollouts(nodeScope(command.target)), kc, reader, io);
    }
  } catch (error) {
    if (error instanceof CliFailure) {
      io.writeError(`error: ${error.message}\n`);
      return 1;
    }
    if (apiStatusCode(error) !== undefined) {
      io.writeError(`error: ${apiErrorMessage(error)}\n`);
      return 1;
    }
    throw error;
  }
}

async function runStatus(command: Extract<CliCommand, { kind: 'status' }>, namespace: string, reader: ClusterReader, io: CliIo): Promise<number> {
  const scope: Scope = { namespace: command.target.allNamespaces ? undefined : namespace };
  const read = async (): Promise<RolloutView[]> => {
    const rollouts = (await reader.listRollouts(scope)).filter((r) => command.rollout === undefined || r.metadata?.name === command.rollout);
    if (command.rollout !== undefined && rollouts.length === 0) throw new CliFailure(`DriverRollout "${command.rollout}" not found in namespace ${namespace}`);
    return buildRolloutViews(await reader.readSnapshot(rollouts), io.now());
  };
  const width = command.width ?? io.width;
  if (command.watch) {
    await watchStatus({ read, render: (views) => renderStatus(views, width), write: io.write, redraw: io.isTerminal, signal: io.signal });
    return 0;
  }
  const views = await read();
  if (command.output === 'json') io.write(`${JSON.stringify({ rollouts: views }, null, 2)}\n`);
  else if (command.output === 'yaml') io.write(stringify({ rollouts: views }));
  else {
    const hint = views.length === 0 && !command.target.allNamespaces ? [`(namespace ${namespace}; -A for every namespace)`] : [];
    io.write(`${[...renderStatus(views, width), ...hint].join('\n')}\n`);
  }
  return 0;
}

async function runWhy(command: Extract<CliCommand, { kind: 'why' }>, reader: ClusterReader, io: CliIo): Promise<number> {
  const rollouts = await reader.listRollouts(nodeScope(command.target));
  const [node, pods, events] = await Promise.all([reader.readNode(command.node), reader.podsOnNode(command.node), reader.nodeEvents(command.node)]);
  const chosen = command.driver === undefined ? rollouts : rollouts.filter((r) => r.spec?.driverName === command.driver);
  const views = buildRolloutViews(await reader.readSnapshot(chosen), io.now());
  const pdbs = await reader.pdbsIn([...new Set(pods.map((p) => p.metadata?.namespace ?? ''))]);
  const why = buildWhyViews({ node: node.metadata?.name ?? command.node, rollouts: views, pods, pdbs, events, nowMs: io.now() });
  io.write(`${renderWhy(why, command.node, command.width ?? io.width).join('\n')}\n`);
  return 0;
}

async function pauseOrResume(kind: 'pause' | 'resume', name: string | undefined, namespace: string, kc: KubeConfig, reader: ClusterReader, io: CliIo): Promise<number> {
  const rollout = pickRollout(await reader.listRollouts({ namespace }), name, namespace);
  const autoUpgrade = kind === 'resume';
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
    { group: GROUP, version: VERSION, plural: PLURAL, namespace, name: rollout.metadata?.name ?? '', body: { spec: { upgradePolicy: { autoUpgrade } } } },
    MERGE_PATCH,
  );
  const what = autoUpgrade ? 'resumed (autoUpgrade=true)' : 'paused (autoUpgrade=false): nodes already upgrading finish, no new node starts';
  io.write(`driverrollout ${namespace}/${rollout.metadata?.name ?? ''} ${what}\n`);
  return 0;
}

/**
 * Approves the canary of the revision the rollout's status names: the DriverRollout's
 * annotations name that revision and who approved (the coordinator lets only that revision
 * through, and records who in an Event). Refuses when no canary holds a revision.
 */
async function approve(name: string | undefined, namespace: string, kc: KubeConfig, reader: ClusterReader, io: CliIo): Promise<number> {
  const rollout = pickRollout(await reader.listRollouts({ namespace }), name, namespace);
  const rolloutName = rollout.metadata?.name ?? '';
  const canary = rollout.status?.canary;
  const revision = canary?.revision;
  if (canary == null || typeof revision !== 'string' || revision === '') {
    throw new CliFailure(`driverrollout ${namespace}/${rolloutName} has no canary waiting (status.canary is empty): nothing to approve`);
  }
  if (canary.approvedBy != null) {
    io.write(`driverrollout ${namespace}/${rolloutName}: revision ${revision} is already approved by ${canary.approvedBy}\n`);
    return 0;
  }
  const user = await reader.whoAmI();
  const annotations = { [CANARY_APPROVED_REVISION_ANNOTATION]: revision, [CANARY_APPROVED_BY_ANNOTATION]: user };
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
    { group: GROUP, version: VERSION, plural: PLURAL, namespace, name: rolloutName, body: { metadata: { annotations } } },
    MERGE_PATCH,
  );
  const nodes = (canary.nodes ?? []).join(', ');
  io.write(`driverrollout ${namespace}/${rolloutName}: revision ${revision} approved by ${user} (canary nodes ${nodes}, ${canary.phase ?? 'phase unknown'}): the other nodes go on within the limits\n`);
  return 0;
}

async function actOnNode(kind: 'retry' | 'skip' | 'unskip', nodeName: string, driver: string | undefined, rollouts: readonly RolloutObject[], kc: KubeConfig, reader: ClusterReader, io: CliIo): Promise<number> {
  const node = await reader.readNode(nodeName);
  const picked = pickNodeDriver(node, rollouts, driver);
  const keys = driverKeys(picked.driver, picked.keyDomain);
  const labels = node.metadata?.labels ?? {};
  let patch: Record<string, string | null>;
  let done: string;
  if (kind === 'retry') {
    const state = labels[keys.upgradeState] ?? 'unknown';
    if (state !== 'upgrade-failed') throw new CliFailure(`node ${nodeName} is in ${state}, not upgrade-failed: nothing to retry`);
    patch = { [keys.upgradeState]: 'upgrade-required' };
    done = `node/${nodeName} ${keys.upgradeState}=upgrade-required: the coordinator retries its upgrade (steps already done are skipped)`;
  } else if (kind === 'skip') {
    patch = { [keys.upgradeSkip]: 'true' };
    done = `node/${nodeName} ${keys.upgradeSkip}=true: the coordinator leaves it alone`;
  } else {
    patch = { [keys.upgradeSkip]: null };
    done = `node/${nodeName} ${keys.upgradeSkip} removed`;
  }
  await kc.makeApiClient(CoreV1Api).patchNode({ name: nodeName, body: { metadata: { labels: patch } } }, MERGE_PATCH);
  io.write(`${done}\n`);
  return 0;
}

/** Node commands look at every namespace's rollouts unless -n names one. */
function nodeScope(target: Target): Scope {
  return { namespace: target.allNamespaces ? undefined : target.namespace };
}

function contextNamespace(kc: KubeConfig): string {
  return kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
}
