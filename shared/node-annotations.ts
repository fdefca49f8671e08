/**
 * The per-node annotations of one driver (shared/keys.ts `DriverKeys`), each with its one schema,
 * parsed here and nowhere else (docs/decisions/0006). A read gives the typed value, undefined when
 * the annotation is absent, or a NodeAnnotationProblem naming the object, the key and what is
 * wrong: a value that does not parse is never read as a default. What a read site does with a
 * problem (a reason, an Event, a fresh timer) is its own contract. Pure; no I/O.
 */
import { parseLoadedDriver, type PublishedDriver } from './driver-identity.ts';
import type { DriverKeys } from './keys.ts';
import { parseKernelSignaturePolicy, type KernelSignaturePolicy } from './kernel-signature-policy.ts';
import { parseSignatureVerdict, type SignatureVerdict } from './module-signature-verdict.ts';

/** An annotation whose value does not parse: which object, which key, what is wrong. */
export class NodeAnnotationProblem {
  readonly object: string;
  readonly key: string;
  /** What is wrong, with the value as found: `is not unix seconds: "soon"`. */
  readonly what: string;

  constructor(object: string, key: string, what: string) {
    this.object = object;
    this.key = key;
    this.what = what;
  }

  /** `node/gpu-1: annotation <key> is not unix seconds: "soon"`. */
  get message(): string {
    return `${this.object}: annotation ${this.key} ${this.what}`;
  }
}

/** One annotation's schema: its value parsed, or what is wrong with it. */
export interface AnnotationSchema<T> {
  /** What a good value is, for documentation and messages. */
  readonly holds: string;
  parse(raw: string): { readonly value: T } | { readonly wrong: string };
}

const quoted = (raw: string): string => JSON.stringify(raw);

/** Unix seconds (NVIDIA's start-time annotations), read as ms since epoch. */
export const UNIX_SECONDS: AnnotationSchema<number> = {
  holds: 'unix seconds',
  parse: (raw) => (/^\d+$/.test(raw.trim()) ? { value: Number(raw.trim()) * 1000 } : { wrong: `is not unix seconds: ${quoted(raw)}` }),
};

/** Free text, any value (an empty one included): the annotation's presence or words are what count. */
export const TEXT: AnnotationSchema<string> = {
  holds: 'text',
  parse: (raw) => ({ value: raw }),
};

/** `"true"` or `"false"`. */
export const FLAG: AnnotationSchema<boolean> = {
  holds: '"true" or "false"',
  parse: (raw) => (raw === 'true' ? { value: true } : raw === 'false' ? { value: false } : { wrong: `is not "true" or "false": ${quoted(raw)}` }),
};

/** Comma-separated `<namespace>/<name>` entries (a DaemonSet's name may be empty); empty when the value is empty. */
export const COMMA_LIST: AnnotationSchema<ReadonlySet<string>> = {
  holds: 'comma-separated <namespace>/<name> entries',
  parse: (raw) => {
    const entries = raw === '' ? [] : raw.split(',');
    const bad = entries.filter((e) => !e.includes('/'));
    return bad.length === 0 ? { value: new Set(entries) } : { wrong: `holds entries that are not <namespace>/<name>: ${quoted(raw)}` };
  },
};

/** A JSON object of label → value (the operand labels paused and their previous values). */
export const LABEL_VALUES: AnnotationSchema<Readonly<Record<string, string>>> = {
  holds: 'a JSON object of label values',
  parse: (raw) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return { wrong: `is not JSON: ${quoted(raw)}` };
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { wrong: `is not a JSON object of label values: ${quoted(raw)}` };
    const labels: Record<string, string> = {};
    const bad: string[] = [];
    for (const [label, value] of Object.entries(parsed as Record<string, unknown>)) {
      if (typeof value === 'string') labels[label] = value;
      else bad.push(label);
    }
    return bad.length > 0 ? { wrong: `holds a value that is not a string for ${bad.join(', ')}: ${quoted(raw)}` } : { value: labels };
  },
};

/** The agent's `{"pod":"<ns>/<name>","driver":<fingerprint>}` (shared/driver-identity.ts). */
export const LOADED_DRIVER: AnnotationSchema<PublishedDriver> = {
  holds: 'the agent\'s {"pod":...,"driver":...} record',
  parse: (raw) => {
    const loaded = parseLoadedDriver(raw);
    return loaded === null ? { wrong: `is not the agent's {"pod":...,"driver":...} record: ${quoted(raw)}` } : { value: loaded };
  },
};

/** The agent's module-signature verdict (shared/module-signature-verdict.ts). */
export const SIGNATURE_VERDICT: AnnotationSchema<SignatureVerdict> = {
  holds: 'the agent\'s {"driver":...,"kernel":...,"enforcedBy":[...],"untrusted":[...],"trustedKeys":[...]} verdict',
  parse: (raw) => {
    const verdict = parseSignatureVerdict(raw);
    return verdict === null ? { wrong: `is not the agent's module-signature verdict: ${quoted(raw)}` } : { value: verdict };
  },
};

/** The node's own module-signature facts (shared/kernel-signature-policy.ts). */
export const KERNEL_SIGNATURE_POLICY: AnnotationSchema<KernelSignaturePolicy> = {
  holds: 'the agent\'s {"kernel":...,"enforcedBy":[...],"keys":[{"name":...,"id":...}]} record',
  parse: (raw) => {
    const policy = parseKernelSignaturePolicy(raw);
    return policy === null ? { wrong: `is not the agent's kernel signature policy: ${quoted(raw)}` } : { value: policy };
  },
};

/**
 * The holders of a node's cordon (keys.ts CORDON_HOLDERS_ANNOTATION): comma-separated, blanks
 * dropped, sorted. Every other text is a holder too: an entry we do not recognise still holds
 * the node, so it never reads as "no one holds it".
 */
export const CORDON_HOLDERS: AnnotationSchema<readonly string[]> = {
  holds: 'comma-separated cordon holders <keyDomain>/<driverName>',
  parse: (raw) => ({ value: [...new Set(raw.split(',').map((h) => h.trim()).filter((h) => h !== ''))].sort() }),
};

/** Every per-node annotation key of DriverKeys, with its schema. */
export const NODE_ANNOTATIONS = {
  waitForSafeLoad: TEXT,
  initialStateUnschedulable: TEXT,
  waitForPodCompletionStartTime: UNIX_SECONDS,
  validationStartTime: UNIX_SECONDS,
  upgradeRequested: FLAG,
  upgradeReason: TEXT,
  stateStartTime: UNIX_SECONDS,
  upgradeStartTime: UNIX_SECONDS,
  drainStartTime: UNIX_SECONDS,
  podDeletionStartTime: UNIX_SECONDS,
  podRestartStartTime: UNIX_SECONDS,
  driverFailingSince: UNIX_SECONDS,
  failedRevision: TEXT,
  pausedOperands: LABEL_VALUES,
  operandPauseStartTime: UNIX_SECONDS,
  clientsRecreated: COMMA_LIST,
  clientsStopped: COMMA_LIST,
  driverLoaded: LOADED_DRIVER,
  moduleSignatures: SIGNATURE_VERDICT,
  kernelSignaturePolicy: KERNEL_SIGNATURE_POLICY,
  restartOnly: FLAG,
  lastStartTime: UNIX_SECONDS,
  upgradeDoneTime: UNIX_SECONDS,
  canary: TEXT,
  canaryFailed: TEXT,
  notReadyFrozen: UNIX_SECONDS,
  notReadyCountedFrom: UNIX_SECONDS,
  stoppedFor: TEXT,
} as const satisfies Partial<Record<keyof DriverKeys, AnnotationSchema<unknown>>>;

export type NodeAnnotation = keyof typeof NODE_ANNOTATIONS;
export type NodeAnnotationValue<A extends NodeAnnotation> = (typeof NODE_ANNOTATIONS)[A] extends AnnotationSchema<infer T> ? T : never;

/** `raw` (the annotation `key` of `object`, e.g. `node/gpu-1`) by `schema`: its value, undefined when absent, or the problem. */
export function parseNodeAnnotation<T>(schema: AnnotationSchema<T>, object: string, key: string, raw: string | undefined): T | NodeAnnotationProblem | undefined {
  if (raw === undefined) return undefined;
  const parsed = schema.parse(raw);
  return 'wrong' in parsed ? new NodeAnnotationProblem(object, key, parsed.wrong) : parsed.value;
}

/** A node's annotation `annotation` of this driver: its value, undefined when absent, or the problem. */
export function readNodeAnnotation<A extends NodeAnnotation>(
  node: { readonly name: string; readonly annotations: Readonly<Record<string, string>> },
  keys: DriverKeys,
  annotation: A,
): NodeAnnotationValue<A> | NodeAnnotationProblem | undefined {
  const key = keys[annotation];
  const schema = NODE_ANNOTATIONS[annotation] as AnnotationSchema<NodeAnnotationValue<A>>;
  return parseNodeAnnotation(schema, `node/${node.name}`, key, node.annotations[key]);
}
