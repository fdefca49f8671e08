/**
 * The DriverRollout custom resource (driverrollout.io/v1alpha1): its spec schema, defaults and
 * the normalised policy the planner reads.
 *
 * Field names and defaults follow the GPU Operator's `driver.upgradePolicy` so existing
 * configuration carries over; `podDeletion` is the GPU Operator's `gpuPodDeletion` generalised
 * to any device (resource-name prefixes). The defaults that depend on the driver (pod deletion,
 * drain, device pods, operands) follow the operator the driver comes from: driver-defaults.ts. The same rules are written a second time as OpenAPI +
 * CEL in manifests/driverrollout-crd.yaml; test/unit/coordinator/policy checks that both agree.
 *
 * Semantics that differ from upstream on purpose are documented on the fields below.
 */
import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';
import { DEFAULT_KEY_DOMAIN, driverKeys, upgradeEventReason, type DriverKeys } from '../../shared/keys.ts';
import { driverDefaults } from './driver-defaults.ts';
import { compileMaintenanceWindow, MAX_MAINTENANCE_WINDOWS, maintenanceWindowSchema, type MaintenanceWindow } from './maintenance-window.ts';
import {
  compileLabelSelector,
  isLabelKey,
  parseLabelSelector,
  type Selector,
  type SelectorResult,
} from './label-selector.ts';

export const DRIVER_ROLLOUT_GROUP = 'driverrollout.io';
export const DRIVER_ROLLOUT_VERSION = 'v1alpha1';
export const DRIVER_ROLLOUT_KIND = 'DriverRollout';
export const DRIVER_ROLLOUT_PLURAL = 'driverrollouts';
export const DRIVER_ROLLOUT_API_VERSION = `${DRIVER_ROLLOUT_GROUP}/${DRIVER_ROLLOUT_VERSION}`;

/** The implicit pool of nodes that match no pool's nodeSelector; a user pool may not take this name. */
export const DEFAULT_POOL_NAME = 'default';

/** Longest driver name for which every key in shared/keys.ts stays a valid label key (name part <= 63). */
export const MAX_DRIVER_NAME_LENGTH = 13;

export const DRIVER_NAME_PATTERN = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_SUBDOMAIN_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const POOL_NAME_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** `maxUnavailable` as a string: a whole percentage from 0% to 100%. */
export const PERCENT_PATTERN = /^(100|[1-9]?[0-9])%$/;
/** A Secret's or ConfigMap's data key. */
export const CONFIG_KEY_PATTERN = /^[-._a-zA-Z0-9]+$/;

/** An alert-name pattern as the gate matches it: anchored at both ends, as Prometheus's `=~`; an Error when it does not compile. */
export function compileAlertNamePattern(source: string): RegExp | Error {
  try {
    return new RegExp(`^(?:${source})$`, 'u');
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/** Why `text` is no alert gate URL (http or https, a host, no user or password, no query); null when it is one. */
export function alertGateUrlProblem(text: string): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http:// or https:// URL';
  if (url.username !== '' || url.password !== '') return 'must not hold a user or password: put a token in bearerTokenSecretRef';
  if (url.search !== '' || url.hash !== '') return 'must not have a query or fragment';
  return null;
}

const labelSelectorSchema = z.object({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(
      z
        .object({
          key: z.string().min(1),
          operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
          values: z.array(z.string()).optional(),
        })
        .superRefine((e, ctx) => {
          const needsValues = e.operator === 'In' || e.operator === 'NotIn';
          const count = e.values?.length ?? 0;
          if (needsValues && count === 0) ctx.addIssue({ code: 'custom', message: `operator ${e.operator} needs at least one value` });
          if (!needsValues && count > 0) ctx.addIssue({ code: 'custom', message: `operator ${e.operator} takes no values` });
        }),
    )
    .optional(),
});

/** Selects something: an empty selector (no matchLabels, no matchExpressions) selects everything. */
function isNonEmptySelector(s: z.output<typeof labelSelectorSchema>): boolean {
  return Object.keys(s.matchLabels ?? {}).length + (s.matchExpressions ?? []).length > 0;
}

/** A label selector in string form (`app=web,tier!=db`), as the GPU Operator writes pod selectors. */
const selectorString = z.string().superRefine((text, ctx) => {
  const parsed = parseLabelSelector(text);
  if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message });
});

const timeoutSeconds = (defaultValue: number) => z.int().min(0).default(defaultValue);
const intOrPercent = z.union([z.int().min(0), z.string().regex(PERCENT_PATTERN, 'must be a whole percentage like "25%" (0% to 100%)')], {
  error: 'must be an integer >= 0 or a percentage like "25%"',
});

const poolSchema = z.object({
  name: z
    .string()
    .max(63)
    .regex(POOL_NAME_PATTERN, 'must be a DNS label (lower-case letters, digits, "-")')
    .refine((n) => n !== DEFAULT_POOL_NAME, `"${DEFAULT_POOL_NAME}" is the implicit pool of nodes in no pool`),
  /** Must not be empty: an empty selector matches every node, and beside another pool puts every node in two. */
  nodeSelector: labelSelectorSchema.refine(isNonEmptySelector, 'must select the pool\'s nodes: an empty nodeSelector matches every node'),
  /** Defaults to the top-level upgradePolicy.maxUnavailable, applied to this pool's node count. */
  maxUnavailable: intOrPercent.optional(),
  /** Defaults to the top-level upgradePolicy.maxParallelUpgrades. 0 = unlimited. */
  maxParallelUpgrades: z.int().min(0).optional(),
  /** Defaults to the top-level upgradePolicy.minSecondsBetweenStarts. */
  minSecondsBetweenStarts: z.int().min(0).optional(),
  /** Defaults to the top-level upgradePolicy.soakSecondsAfterUpgrade. */
  soakSecondsAfterUpgrade: z.int().min(0).optional(),
});

const upgradePolicySchema = z.object({
  /** false pauses the rollout: no node starts an upgrade; nodes already started finish. */
  autoUpgrade: z.boolean().default(true),
  /**
   * Emergency stop (ours): true freezes every node where it is, started ones included: no
   * cordon, eviction, pod deletion, driver restart or uncordon; each waits with the reason
   * "stopped" and its step timer is dropped. false again resumes each node where it stopped,
   * its step's timeout counted afresh. Pause (autoUpgrade false) only keeps nodes from starting.
   */
  stop: z.boolean().default(false),
  /** Nodes upgrading at once per pool; 0 = unlimited. */
  maxParallelUpgrades: z.int().min(0).default(1),
  /** Per pool: int, or percent of the pool's managed nodes rounded up. Cordoned or NotReady nodes count. */
  maxUnavailable: intOrPercent.default('25%'),
  /**
   * Pacing (ours), per pool: at least this long between two node starts (a retry counts as a
   * start). The last start is read from the nodes (lastStartTime, upgradeStartTime), so a new
   * leader keeps the pace. 0 = no delay.
   */
  minSecondsBetweenStarts: z.int().min(0).default(0),
  /**
   * Pacing (ours), per pool: a node that reached upgrade-done keeps its parallel slot
   * (maxParallelUpgrades) this long before another node may take it; once uncordoned and Ready it
   * holds no unavailable slot. With maxParallelUpgrades 0 (unlimited) there is no slot to keep and
   * the soak holds nothing. 0 = no soak.
   */
  soakSecondsAfterUpgrade: z.int().min(0).default(0),
  /**
   * When nodes may start an upgrade (ours): a union of weekly windows in IANA time zones
   * (maintenance-window.ts). Outside every window no node starts; nodes already started finish.
   * Empty: always.
   */
  maintenanceWindows: z.array(maintenanceWindowSchema).max(MAX_MAINTENANCE_WINDOWS).default([]),
  waitForCompletion: z
    .object({
      /** Pods to wait for; "" waits on none (the state is passed through). */
      podSelector: selectorString.default(''),
      /** 0 waits forever; on timeout the upgrade moves on to pod deletion (as upstream). */
      timeoutSeconds: timeoutSeconds(0),
    })
    .prefault({}),
  /**
   * Removal of the pods that use the device (the GPU Operator's gpuPodDeletion). They are evicted through the Eviction API, so PodDisruptionBudgets hold (upstream's
   * drain helper evicts too); on success drain is skipped. When they cannot be removed (unmanaged
   * without `force`, emptyDir without `deleteEmptyDir`, an eviction still refused at the timeout)
   * the node goes to drain-required if drain is enabled, else to upgrade-failed, naming the pod
   * and the PDB. `enable: false` skips the step (the node goes to drain-required).
   */
  podDeletion: z
    .object({
      /** Absent: by the driver (driver-defaults.ts): on for GPU drivers, off for NIC drivers (the Network Operator has no such step). */
      enable: z.boolean().optional(),
      /** As `kubectl drain --force`: also evict pods no controller manages (they are not recreated). */
      force: z.boolean().default(false),
      /** 0 waits forever for deleted pods to go away. */
      timeoutSeconds: timeoutSeconds(300),
      deleteEmptyDir: z.boolean().default(false),
      /**
       * A pod uses the device when a container requests or limits a resource whose name starts
       * with one of these. Absent: by the driver (driver-defaults.ts), GPU resources for `gpu`,
       * RDMA/SR-IOV resources for `ofed`, both for other names.
       */
      resourcePrefixes: z.array(z.string().min(1)).optional(),
      /** Pods matching this selector also count as device pods (e.g. RDMA pods that request nothing). */
      podSelector: selectorString.optional(),
    })
    .prefault({}),
  drain: z
    .object({
      /** Absent: by the driver (driver-defaults.ts): off for GPU drivers, on for NIC drivers (the Network Operator's default). */
      enable: z.boolean().optional(),
      /** Evict pods that no controller manages. */
      force: z.boolean().default(false),
      /** Pods to evict; "" evicts all (except DaemonSet, mirror and drain-skip pods). */
      podSelector: selectorString.default(''),
      /** 0 waits forever; on timeout the node goes to upgrade-failed. */
      timeoutSeconds: timeoutSeconds(300),
      deleteEmptyDir: z.boolean().default(false),
    })
    .prefault({}),
  /**
   * Device clients stopped before the driver pod is restarted (pod-restart-required), as
   * NVIDIA's k8s-driver-manager does; brought back once the new driver is Ready.
   */
  clients: z
    .object({
      /**
       * Node label keys of operands (DaemonSets that use the device, selected by these labels).
       * Each one present on the node is set to `paused-for-driver-upgrade` (previous values kept
       * in an annotation) and its pods must leave the node. Absent: by the driver
       * (driver-defaults.ts), GPU_OPERAND_LABELS for GPU drivers, none for others.
       */
      operandLabels: z.array(z.string().refine(isLabelKey, 'must be a label key')).max(32).optional(),
      /**
       * DaemonSet pods matching this selector use the device too: they are deleted at the same
       * step, once (only pods created before the step began; a replacement gets a Warning Event
       * naming its DaemonSet: pause it with operandLabels). See coordinator/plan/device-clients.ts.
       */
      podSelector: selectorString.optional(),
      /** Longest wait for operands and client pods to leave; then upgrade-failed. 0 waits forever. */
      timeoutSeconds: timeoutSeconds(300),
    })
    .prefault({}),
  /**
   * The driver pod's restart (pod-restart-required). Upstream only fails a node whose driver
   * container restarted more than 10 times; our agent retries in-process and never restarts, so
   * both limits below are ours. Either one makes the node upgrade-failed (and leaves it by
   * itself once the driver pod is current and Ready).
   */
  podRestart: z
    .object({
      /**
       * No Ready driver pod this long after pod-restart-required began, whatever the cause (image
       * pull error, init container crash loop, a slow build): upgrade-failed. 0 waits forever.
       * Default 900 s: an image pull (1–3 min for a driver image) plus a cache-miss build of
       * NVIDIA's driver (3–5 min) with twice that to spare.
       */
      timeoutSeconds: timeoutSeconds(900),
      /**
       * The agent reports a failure reason (CompileFailed, KernelHeadersMissing, LoadFailed,
       * DriverInUse, ...) on the current driver pod and has not become Ready within this long of
       * first reporting it: upgrade-failed with the agent's message. 0 never fails on the reason
       * alone. Default 120 s: the agent retries after 10, 20 and 40 s (its backoff), so a passing
       * cause (a client pod finishing its 30 s grace period, a retried load from the build cache)
       * has three tries to clear, while a broken build frees the pool's slot, and counts against
       * maxFailedNodes, within two minutes instead of hours.
       */
      failAfterSeconds: timeoutSeconds(120),
    })
    .prefault({}),
  validation: z
    .object({
      /** Validator pods on the node that must be Ready; "" skips validation. */
      podSelector: selectorString.default(''),
      /** 0 waits forever; on timeout the node goes to upgrade-failed. Upstream hard-codes 600 s. */
      timeoutSeconds: timeoutSeconds(600),
    })
    .prefault({}),
});

/** `canary.nodes`: at least one node, or a percentage of the managed nodes rounded up (at least one). */
const canaryNodes = z.union([z.int().min(1), z.string().regex(/^(100|[1-9][0-9]?)%$/, 'must be a whole percentage like "10%" (1% to 100%)')], {
  error: 'must be an integer >= 1 or a percentage like "10%"',
});

/**
 * The canary (ours): when a new driver revision appears, a few nodes take it first; the rest wait
 * until a person approves it (`kubectl driver-rollout approve`) or, with `then: Continue`, until
 * the canary nodes have stayed upgrade-done, Ready and schedulable for `soakSeconds`. See
 * coordinator/plan/canary-gate.ts.
 */
const canarySchema = z.object({
  /** How many nodes: the first N (or N% of the managed nodes, rounded up) in start order, among those `selector` picks. */
  nodes: canaryNodes,
  /** Only these nodes may be canaries. Absent: any managed node. */
  selector: labelSelectorSchema.optional(),
  /** Pause: the rest wait for an approval of the revision. Continue: they go on once the canary has soaked. */
  then: z.enum(['Pause', 'Continue']).default('Pause'),
  /** With Continue: how long every canary node must stay upgrade-done, Ready and schedulable. */
  soakSeconds: z.int().min(0).default(600),
});

/** A key of a Secret or ConfigMap in the DriverRollout's namespace. */
const keyRefSchema = z.object({
  name: z.string().min(1).max(253).regex(DNS_SUBDOMAIN_PATTERN, 'must be a DNS subdomain (an object name)'),
  key: z.string().min(1).max(253).regex(CONFIG_KEY_PATTERN, 'must be a Secret or ConfigMap key (letters, digits, "-", "_", ".")'),
});

/** An alert-name regular expression: compiled here so that a bad one is named at its path. */
const alertNamePatterns = z.array(z.string().min(1).max(1024).superRefine((source, ctx) => {
  const compiled = compileAlertNamePattern(source);
  if (compiled instanceof Error) ctx.addIssue({ code: 'custom', message: `not a regular expression: ${compiled.message}` });
})).max(64);

/**
 * Holds new starts while Prometheus reports a matching alert firing, or cannot be asked (fails
 * closed). The leader polls `<url>/api/v1/alerts` every intervalSeconds (coordinator/alerts/).
 */
const alertGateSchema = z.object({
  /** Prometheus's base URL (http or https, no user or password in it: a token goes in bearerTokenSecretRef). */
  url: z.string().max(2048).superRefine((text, ctx) => {
    const problem = alertGateUrlProblem(text);
    if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
  }),
  /** Alert names (regular expressions, anchored at both ends as Prometheus's =~) that hold starts; absent or empty: every firing alert. */
  alerts: alertNamePatterns.optional(),
  /** Alert names (anchored regular expressions) that never hold starts, even when `alerts` matches them. */
  ignore: alertNamePatterns.optional(),
  /** Seconds between two polls. */
  intervalSeconds: z.int().min(5).max(3600).default(30),
  /** A poll that has no answer within this long holds starts as unreachable. */
  timeoutSeconds: z.int().min(1).max(300).default(10),
  tls: z
    .object({
      /** The CA bundle (PEM) that signs Prometheus's certificate, from a Secret or a ConfigMap key (one of them). */
      ca: z
        .object({ secretKeyRef: keyRefSchema.optional(), configMapKeyRef: keyRefSchema.optional() })
        .refine((ca) => (ca.secretKeyRef === undefined) !== (ca.configMapKeyRef === undefined), 'set exactly one of secretKeyRef and configMapKeyRef')
        .optional(),
      /** Accept any certificate (testing only): the token is then sent to whoever answers. */
      insecureSkipVerify: z.boolean().default(false),
    })
    .optional(),
  /** A Secret key holding the bearer token sent to Prometheus (Authorization: Bearer); never logged, never in the status or Events. */
  bearerTokenSecretRef: keyRefSchema.optional(),
}).superRefine((gate, ctx) => {
  if (gate.tls !== undefined && !gate.url.startsWith('https://')) ctx.addIssue({ code: 'custom', message: 'tls needs an https:// url' });
});

const driverNameSchema = z
  .string()
  .max(MAX_DRIVER_NAME_LENGTH, `must be at most ${MAX_DRIVER_NAME_LENGTH} characters (it is part of every label key)`)
  .regex(DRIVER_NAME_PATTERN, 'must be a DNS label starting with a letter (e.g. "gpu", "ofed")');

export const driverRolloutSpecSchema = z.object({
  driverName: driverNameSchema,
  keyDomain: z.string().max(253).regex(DNS_SUBDOMAIN_PATTERN, 'must be a DNS subdomain').default(DEFAULT_KEY_DOMAIN),
  /** Selects the driver DaemonSet(s) in the DriverRollout's namespace; must not be empty. */
  selector: labelSelectorSchema.refine(isNonEmptySelector, 'must select the driver DaemonSet(s): an empty selector would select every DaemonSet'),
  upgradePolicy: upgradePolicySchema.prefault({}),
  /** Upgrade failures (nodes in upgrade-failed, all pools) at which the rollout halts. Absent: never halts. */
  maxFailedNodes: z.int().min(1).optional(),
  /**
   * The drivers (their driverName, in this rollout's keyDomain) this one loads after on a node
   * they share, e.g. `[ofed]` for gpu: nvidia_peermem links against the NIC stack and holds
   * ib_core. On a node both upgrade, this driver is stopped before those reload and loaded only
   * once they have (coordinator/plan/load-order.ts).
   */
  loadsAfter: z.array(driverNameSchema).max(8).optional(),
  /** A few nodes first, then approval or a soak (ours). Absent: no canary. */
  canary: canarySchema.optional(),
  /**
   * A failed canary halts the rollout (Halt), or also rolls the driver DaemonSets whose new
   * revision only the canary runs back to their previous ControllerRevision's template (Rollback).
   */
  onCanaryFailure: z.enum(['Halt', 'Rollback']).default('Halt'),
  /** No node starts while a matching Prometheus alert fires, or while Prometheus cannot be asked (fails closed). */
  alertGate: alertGateSchema.optional(),
  /** Node label ordering nodes: lower numbers first, then other values in string order, unlabelled last. */
  priorityLabel: z.string().refine(isLabelKey, 'must be a label key').optional(),
  pools: z
    .array(poolSchema)
    .default([])
    .superRefine((pools, ctx) => {
      const seen = new Set<string>();
      for (const [i, p] of pools.entries()) {
        if (seen.has(p.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate pool name "${p.name}"` });
        seen.add(p.name);
      }
    }),
}).superRefine((spec, ctx) => {
  for (const [i, driver] of (spec.loadsAfter ?? []).entries()) {
    if (driver === spec.driverName) ctx.addIssue({ code: 'custom', path: ['loadsAfter', i], message: 'a driver cannot load after itself' });
  }
});

/** The spec as written, with defaults applied. */
export type DriverRolloutSpec = z.output<typeof driverRolloutSpecSchema>;
/** The spec as a user may write it (defaulted fields optional). */
export type DriverRolloutSpecInput = z.input<typeof driverRolloutSpecSchema>;

export type IntOrPercent = { readonly kind: 'count'; readonly value: number } | { readonly kind: 'percent'; readonly value: number };

export interface PoolPolicy {
  readonly name: string;
  /** null for the default pool (nodes in no other pool). */
  readonly nodeSelector: Selector | null;
  readonly maxUnavailable: IntOrPercent;
  /** 0 = unlimited. */
  readonly maxParallelUpgrades: number;
  /** 0 = no delay between starts. */
  readonly minSecondsBetweenStarts: number;
  /** 0 = no soak after a node's upgrade. */
  readonly soakSecondsAfterUpgrade: number;
}

export interface KeyRef {
  readonly name: string;
  readonly key: string;
}

/** spec.alertGate, compiled: the poller (coordinator/alerts/) reads the connection, the planner the patterns. */
export interface AlertGatePolicy {
  /** Prometheus's base URL, without a trailing slash. */
  readonly url: string;
  /** Anchored; empty: every firing alert matches. */
  readonly alerts: readonly RegExp[];
  readonly ignore: readonly RegExp[];
  readonly intervalSeconds: number;
  readonly timeoutSeconds: number;
  /** The CA bundle's source; null: the platform's CAs. */
  readonly ca: { readonly kind: 'secret' | 'configMap'; readonly ref: KeyRef } | null;
  readonly insecureSkipVerify: boolean;
  /** null: no Authorization header. */
  readonly bearerToken: KeyRef | null;
}

/** What identifies a device pod: used by pod deletion and by the idle-first ordering. */
export interface DevicePodPolicy {
  readonly resourcePrefixes: readonly string[];
  readonly podSelector: Selector | null;
}

/** spec.canary, normalised. */
export interface CanaryPolicy {
  readonly nodes: IntOrPercent;
  /** null: any managed node may be a canary. */
  readonly selector: Selector | null;
  readonly then: 'Pause' | 'Continue';
  readonly soakSeconds: number;
}

/** The normalised policy: defaults applied, selectors compiled. Everything the planner reads. */
export interface DriverRolloutPolicy {
  readonly spec: DriverRolloutSpec;
  readonly driverName: string;
  readonly keyDomain: string;
  readonly keys: DriverKeys;
  /** Event reason, e.g. `GPUDriverUpgrade`. */
  readonly eventReason: string;
  readonly daemonSetSelector: Selector;
  readonly autoUpgrade: boolean;
  /** Emergency stop: no node moves or is acted on. */
  readonly stop: boolean;
  /** When nodes may start; empty: always. */
  readonly maintenanceWindows: readonly MaintenanceWindow[];
  readonly waitForCompletion: { readonly podSelector: Selector | null; readonly timeoutSeconds: number };
  /** null: podDeletion.enable is false. */
  readonly podDeletion: {
    readonly force: boolean;
    readonly timeoutSeconds: number;
    readonly deleteEmptyDir: boolean;
  } | null;
  readonly devicePods: DevicePodPolicy;
  readonly drain: {
    readonly enable: boolean;
    readonly force: boolean;
    readonly podSelector: Selector;
    readonly timeoutSeconds: number;
    readonly deleteEmptyDir: boolean;
  };
  readonly podRestart: { readonly timeoutSeconds: number; readonly failAfterSeconds: number };
  readonly clients: { readonly operandLabels: readonly string[]; readonly podSelector: Selector | null; readonly timeoutSeconds: number };
  readonly validation: { readonly podSelector: Selector | null; readonly timeoutSeconds: number };
  /** Drivers (their names, in keyDomain) this one loads after on a node they share; empty: none. */
  readonly loadsAfter: readonly string[];
  /** null: never halts. */
  readonly maxFailedNodes: number | null;
  /** null: no alert gate. */
  readonly alertGate: AlertGatePolicy | null;
  readonly priorityLabel: string | null;
  /** null: no canary. */
  readonly canary: CanaryPolicy | null;
  readonly onCanaryFailure: 'Halt' | 'Rollback';
  /** User pools in spec order; a node matching two of them is left alone. */
  readonly pools: readonly PoolPolicy[];
  /** Nodes matching no user pool; limits from the top-level upgradePolicy. */
  readonly defaultPool: PoolPolicy;
}

export type ParseResult =
  | { readonly ok: true; readonly policy: DriverRolloutPolicy }
  | { readonly ok: false; readonly problems: readonly ConfigProblem[] };

/**
 * Validates a DriverRollout's `spec` and returns the normalised policy, or every problem at once
 * with its field path (`spec.upgradePolicy.maxUnavailable`, `spec.pools[1].name`).
 */
export function parseDriverRolloutSpec(spec: unknown): ParseResult {
  const parsed = driverRolloutSpecSchema.safeParse(spec);
  if (!parsed.success) {
    return { ok: false, problems: parsed.error.issues.map((i) => ({ path: fieldPath(['spec', ...i.path]), message: i.message })) };
  }
  return compilePolicy(parsed.data);
}

function compilePolicy(spec: DriverRolloutSpec): ParseResult {
  const problems: ConfigProblem[] = [];
  const compile = (path: string, result: SelectorResult): Selector => {
    if (result.ok) return result.selector;
    problems.push({ path, message: result.message });
    return { requirements: [], text: '' };
  };
  const optionalSelector = (path: string, text: string | undefined): Selector | null =>
    text === undefined || text.trim() === '' ? null : compile(path, parseLabelSelector(text));

  const up = spec.upgradePolicy;
  const keys = driverKeys(spec.driverName, spec.keyDomain);
  for (const [name, key] of Object.entries(keys) as [string, string][]) {
    if (name !== 'domain' && name !== 'driver' && !isLabelKey(key)) {
      problems.push({ path: 'spec.driverName', message: `makes the key "${key}" longer than a label key may be` });
      break;
    }
  }
  const daemonSetSelector = compile('spec.selector', compileLabelSelector(spec.selector));
  const topMaxUnavailable = toIntOrPercent(up.maxUnavailable);
  const pools = spec.pools.map(
    (p, i): PoolPolicy => ({
      name: p.name,
      nodeSelector: compile(`spec.pools[${i}].nodeSelector`, compileLabelSelector(p.nodeSelector)),
      maxUnavailable: p.maxUnavailable === undefined ? topMaxUnavailable : toIntOrPercent(p.maxUnavailable),
      maxParallelUpgrades: p.maxParallelUpgrades ?? up.maxParallelUpgrades,
      minSecondsBetweenStarts: p.minSecondsBetweenStarts ?? up.minSecondsBetweenStarts,
      soakSecondsAfterUpgrade: p.soakSecondsAfterUpgrade ?? up.soakSecondsAfterUpgrade,
    }),
  );
  const pd = up.podDeletion;
  const defaults = driverDefaults(spec.driverName);
  const policy: DriverRolloutPolicy = {
    spec,
    driverName: spec.driverName,
    keyDomain: spec.keyDomain,
    keys,
    eventReason: upgradeEventReason(spec.driverName),
    daemonSetSelector,
    autoUpgrade: up.autoUpgrade,
    stop: up.stop,
    maintenanceWindows: up.maintenanceWindows.map(compileMaintenanceWindow),
    waitForCompletion: {
      podSelector: optionalSelector('spec.upgradePolicy.waitForCompletion.podSelector', up.waitForCompletion.podSelector),
      timeoutSeconds: up.waitForCompletion.timeoutSeconds,
    },
    podDeletion: (pd.enable ?? defaults.podDeletionEnable) ? { force: pd.force, timeoutSeconds: pd.timeoutSeconds, deleteEmptyDir: pd.deleteEmptyDir } : null,
    devicePods: {
      resourcePrefixes: pd.resourcePrefixes ?? defaults.resourcePrefixes,
      podSelector: optionalSelector('spec.upgradePolicy.podDeletion.podSelector', pd.podSelector),
    },
    drain: {
      enable: up.drain.enable ?? defaults.drainEnable,
      force: up.drain.force,
      podSelector: compile('spec.upgradePolicy.drain.podSelector', parseLabelSelector(up.drain.podSelector)),
      timeoutSeconds: up.drain.timeoutSeconds,
      deleteEmptyDir: up.drain.deleteEmptyDir,
    },
    podRestart: { timeoutSeconds: up.podRestart.timeoutSeconds, failAfterSeconds: up.podRestart.failAfterSeconds },
    clients: {
      operandLabels: up.clients.operandLabels ?? defaults.operandLabels,
      podSelector: optionalSelector('spec.upgradePolicy.clients.podSelector', up.clients.podSelector),
      timeoutSeconds: up.clients.timeoutSeconds,
    },
    validation: {
      podSelector: optionalSelector('spec.upgradePolicy.validation.podSelector', up.validation.podSelector),
      timeoutSeconds: up.validation.timeoutSeconds,
    },
    loadsAfter: spec.loadsAfter ?? [],
    maxFailedNodes: spec.maxFailedNodes ?? null,
    alertGate: spec.alertGate === undefined ? null : compileAlertGate(spec.alertGate),
    priorityLabel: spec.priorityLabel ?? null,
    canary:
      spec.canary === undefined
        ? null
        : {
            nodes: toIntOrPercent(spec.canary.nodes),
            selector: spec.canary.selector === undefined ? null : compile('spec.canary.selector', compileLabelSelector(spec.canary.selector)),
            then: spec.canary.then,
            soakSeconds: spec.canary.soakSeconds,
          },
    onCanaryFailure: spec.onCanaryFailure,
    pools,
    defaultPool: {
      name: DEFAULT_POOL_NAME,
      nodeSelector: null,
      maxUnavailable: topMaxUnavailable,
      maxParallelUpgrades: up.maxParallelUpgrades,
      minSecondsBetweenStarts: up.minSecondsBetweenStarts,
      soakSecondsAfterUpgrade: up.soakSecondsAfterUpgrade,
    },
  };
  return problems.length > 0 ? { ok: false, problems } : { ok: true, policy };
}

function compileAlertGate(gate: NonNullable<DriverRolloutSpec['alertGate']>): AlertGatePolicy {
  // The schema compiled every pattern already: none is an Error here.
  const patterns = (sources: readonly string[] | undefined): RegExp[] => (sources ?? []).flatMap((p) => {
    const compiled = compileAlertNamePattern(p);
    return compiled instanceof Error ? [] : [compiled];
  });
  const ca = gate.tls?.ca;
  return {
    url: gate.url.replace(/\/+$/, ''),
    alerts: patterns(gate.alerts),
    ignore: patterns(gate.ignore),
    intervalSeconds: gate.intervalSeconds,
    timeoutSeconds: gate.timeoutSeconds,
    ca: ca?.secretKeyRef !== undefined ? { kind: 'secret', ref: ca.secretKeyRef } : ca?.configMapKeyRef !== undefined ? { kind: 'configMap', ref: ca.configMapKeyRef } : null,
    insecureSkipVerify: gate.tls?.insecureSkipVerify ?? false,
    bearerToken: gate.bearerTokenSecretRef ?? null,
  };
}

function toIntOrPercent(value: number | string): IntOrPercent {
  return typeof value === 'number' ? { kind: 'count', value } : { kind: 'percent', value: Number(value.slice(0, -1)) };
}

/** `['spec', 'pools', 1, 'name']` → `spec.pools[1].name`. */
function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}
