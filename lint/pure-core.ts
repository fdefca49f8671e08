/**
 * The pure core, named in one place: the files that decide without touching the world. They
 * import only each other and no I/O (lint/import-boundaries.ts), and read no clock, timer or
 * random source (eslint.config.ts): time and randomness come in as parameters, so every one of
 * them is table-tested without fakes. A folder ends in `/`; anything else is one file.
 */
export const PURE_CORE: readonly string[] = [
  // The coordinator's planner and the policy it reads.
  'coordinator/plan/',
  'coordinator/policy/',
  // The informers' cache bookkeeping.
  'coordinator/cluster/indexed-store.ts',
  // shared/: keys, errors, names, arithmetic and the JSON Patch form every program uses.
  'shared/backoff.ts',
  'shared/config/',
  'shared/cli-help.ts',
  'shared/device-kind.ts',
  'shared/driver-identity.ts',
  'shared/errors.ts',
  'shared/kernel-signature-policy.ts',
  'shared/keys.ts',
  'shared/kmod/find-module-users.ts',
  'shared/kube/json-patch.ts',
  'shared/kmod/loaded-module.ts',
  'shared/module-signature-verdict.ts',
  'shared/node-annotations.ts',
  // The agent's deciders, and the port and device types they decide over.
  'agent/kernel/plan/',
  'agent/kernel/kernel-port.ts',
  'agent/build/build-errors.ts',
  'agent/build/expand-build-variables.ts',
  'agent/build/parse-dkms-conf.ts',
  'agent/detect/device-selector.ts',
  'agent/detect/pci-device.ts',
  'agent/report/driver-state.ts',
  'agent/teardown/holder-command.ts',
  'agent/teardown/plan-device-teardown.ts',
  'agent/user-space/plan/',
  'agent/user-space/user-space-layout.ts',
  'agent/daemons/plan/',
  // The init container's decider.
  'init-container/describe-safe-load-wait.ts',
  'init-container/node-api.ts',
];

/** The `files` globs of PURE_CORE, for an eslint.config.ts block. */
export function pureCoreGlobs(pure: readonly string[] = PURE_CORE): string[] {
  return pure.map((p) => (p.endsWith('/') ? `${p}**/*.ts` : p));
}

/** Globals that read the clock or schedule work: the pure core takes `now` and waits for nothing. */
export const IMPURE_GLOBALS = ['Date', 'performance', 'setTimeout', 'setInterval'].map((name) => ({
  name,
  message: `The pure core (lint/pure-core.ts) reads no clock and schedules nothing: take \`now\` as a parameter.`,
}));

/** Properties the pure core never reads: randomness is a parameter (`random: () => number`). */
export const IMPURE_PROPERTIES = [
  { object: 'Math', property: 'random', message: 'The pure core (lint/pure-core.ts) draws no randomness: take `random: () => number` as a parameter.' },
];
