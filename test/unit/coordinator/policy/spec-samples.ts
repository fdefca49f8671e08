/**
 * DriverRollout specs, valid and invalid, with the field each invalid one must be blamed on.
 * Shared by the zod tests, the CRD-schema agreement test, and usable against a real API server.
 */
export interface SpecSample {
  readonly name: string;
  readonly spec: unknown;
  /** null: valid. Otherwise the field path the problem must name. */
  readonly invalidAt: string | null;
  /** Only the runtime can see this problem (the CRD schema accepts it). */
  readonly runtimeOnly?: boolean;
}

const base = { driverName: 'gpu', selector: { matchLabels: { app: 'gpu-driver' } } };
const withPolicy = (upgradePolicy: object) => ({ ...base, upgradePolicy });
const rack = { matchLabels: { rack: 'a' } };

export const SPEC_SAMPLES: readonly SpecSample[] = [
  { name: 'minimal', spec: base, invalidAt: null },
  {
    name: 'every field',
    spec: {
      driverName: 'ofed',
      keyDomain: 'example.com',
      selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['ofed'] }] },
      upgradePolicy: {
        autoUpgrade: false,
        maxParallelUpgrades: 0,
        maxUnavailable: 3,
        waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 60 },
        podDeletion: { force: true, resourcePrefixes: ['rdma/'], podSelector: 'net=rdma' },
        drain: { enable: true, timeoutSeconds: 0, podSelector: 'tier notin (system),!critical' },
        validation: { podSelector: 'app=v', timeoutSeconds: 30 },
      },
      maxFailedNodes: 2,
      priorityLabel: 'example.com/wave',
      pools: [
        { name: 'a', nodeSelector: { matchLabels: { rack: 'a' } }, maxUnavailable: '50%', maxParallelUpgrades: 2 },
        { name: 'b', nodeSelector: { matchExpressions: [{ key: 'rack', operator: 'Exists' }] } },
      ],
    },
    invalidAt: null,
  },
  { name: 'maxUnavailable 100%', spec: withPolicy({ maxUnavailable: '100%' }), invalidAt: null },
  { name: 'maxUnavailable 0%', spec: withPolicy({ maxUnavailable: '0%' }), invalidAt: null },
  { name: 'maxUnavailable 0', spec: withPolicy({ maxUnavailable: 0 }), invalidAt: null },
  { name: 'maxUnavailable 120%', spec: withPolicy({ maxUnavailable: '120%' }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable "5" (a string that is no percentage)', spec: withPolicy({ maxUnavailable: '5' }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable -1', spec: withPolicy({ maxUnavailable: -1 }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable 2.5', spec: withPolicy({ maxUnavailable: 2.5 }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxParallelUpgrades -1', spec: withPolicy({ maxParallelUpgrades: -1 }), invalidAt: 'spec.upgradePolicy.maxParallelUpgrades' },
  { name: 'autoUpgrade "yes"', spec: withPolicy({ autoUpgrade: 'yes' }), invalidAt: 'spec.upgradePolicy.autoUpgrade' },
  { name: 'waitForCompletion timeout -1', spec: withPolicy({ waitForCompletion: { timeoutSeconds: -1 } }), invalidAt: 'spec.upgradePolicy.waitForCompletion.timeoutSeconds' },
  { name: 'podDeletion timeout -1', spec: withPolicy({ podDeletion: { timeoutSeconds: -1 } }), invalidAt: 'spec.upgradePolicy.podDeletion.timeoutSeconds' },
  { name: 'clients', spec: withPolicy({ clients: { operandLabels: ['nvidia.com/gpu.deploy.device-plugin'], podSelector: 'app=imex', timeoutSeconds: 60 } }), invalidAt: null },
  { name: 'clients operand label not a label key', spec: withPolicy({ clients: { operandLabels: ['not a key'] } }), invalidAt: 'spec.upgradePolicy.clients.operandLabels[0]' },
  { name: 'clients timeout -1', spec: withPolicy({ clients: { timeoutSeconds: -1 } }), invalidAt: 'spec.upgradePolicy.clients.timeoutSeconds' },
  { name: 'stop true', spec: withPolicy({ stop: true }), invalidAt: null },
  { name: 'stop "yes"', spec: withPolicy({ stop: 'yes' }), invalidAt: 'spec.upgradePolicy.stop' },
  { name: 'podDeletion disabled', spec: withPolicy({ podDeletion: { enable: false } }), invalidAt: null },
  { name: 'podDeletion enable "no"', spec: withPolicy({ podDeletion: { enable: 'no' } }), invalidAt: 'spec.upgradePolicy.podDeletion.enable' },
  { name: 'podRestart timeout -1', spec: withPolicy({ podRestart: { timeoutSeconds: -1 } }), invalidAt: 'spec.upgradePolicy.podRestart.timeoutSeconds' },
  { name: 'podRestart failAfterSeconds 2.5', spec: withPolicy({ podRestart: { failAfterSeconds: 2.5 } }), invalidAt: 'spec.upgradePolicy.podRestart.failAfterSeconds' },
  { name: 'drain timeout -5', spec: withPolicy({ drain: { timeoutSeconds: -5 } }), invalidAt: 'spec.upgradePolicy.drain.timeoutSeconds' },
  { name: 'drain timeout 1.5', spec: withPolicy({ drain: { timeoutSeconds: 1.5 } }), invalidAt: 'spec.upgradePolicy.drain.timeoutSeconds' },
  { name: 'validation timeout -1', spec: withPolicy({ validation: { timeoutSeconds: -1 } }), invalidAt: 'spec.upgradePolicy.validation.timeoutSeconds' },
  { name: 'empty resource prefix', spec: withPolicy({ podDeletion: { resourcePrefixes: [''] } }), invalidAt: 'spec.upgradePolicy.podDeletion.resourcePrefixes[0]' },
  { name: 'driverName with capitals', spec: { ...base, driverName: 'GPU' }, invalidAt: 'spec.driverName' },
  { name: 'driverName too long for the label keys', spec: { ...base, driverName: 'averylongdriver' }, invalidAt: 'spec.driverName' },
  { name: 'driverName missing', spec: { selector: base.selector }, invalidAt: 'spec.driverName' },
  { name: 'keyDomain not a DNS subdomain', spec: { ...base, keyDomain: 'Nvidia_com' }, invalidAt: 'spec.keyDomain' },
  { name: 'selector empty', spec: { ...base, selector: {} }, invalidAt: 'spec.selector' },
  { name: 'selector missing', spec: { driverName: 'gpu' }, invalidAt: 'spec.selector' },
  { name: 'selector In without values', spec: { ...base, selector: { matchExpressions: [{ key: 'app', operator: 'In' }] } }, invalidAt: 'spec.selector.matchExpressions[0]' },
  { name: 'selector Exists with values', spec: { ...base, selector: { matchExpressions: [{ key: 'app', operator: 'Exists', values: ['x'] }] } }, invalidAt: 'spec.selector.matchExpressions[0]' },
  { name: 'selector unknown operator', spec: { ...base, selector: { matchExpressions: [{ key: 'app', operator: 'Is', values: ['x'] }] } }, invalidAt: 'spec.selector.matchExpressions[0].operator' },
  { name: 'duplicate pool names', spec: { ...base, pools: [{ name: 'a', nodeSelector: rack }, { name: 'a', nodeSelector: rack }] }, invalidAt: 'spec.pools[1].name' },
  { name: 'pool named default', spec: { ...base, pools: [{ name: 'default', nodeSelector: rack }] }, invalidAt: 'spec.pools[0].name' },
  { name: 'pool name not a DNS label', spec: { ...base, pools: [{ name: 'Rack_A', nodeSelector: rack }] }, invalidAt: 'spec.pools[0].name' },
  { name: 'pool without nodeSelector', spec: { ...base, pools: [{ name: 'a' }] }, invalidAt: 'spec.pools[0].nodeSelector' },
  { name: 'pool with an empty nodeSelector (it would match every node)', spec: { ...base, pools: [{ name: 'a', nodeSelector: {} }] }, invalidAt: 'spec.pools[0].nodeSelector' },
  { name: 'second pool with empty matchLabels and matchExpressions', spec: { ...base, pools: [{ name: 'a', nodeSelector: rack }, { name: 'b', nodeSelector: { matchLabels: {}, matchExpressions: [] } }] }, invalidAt: 'spec.pools[1].nodeSelector' },
  { name: 'gpu loads after ofed', spec: { ...base, loadsAfter: ['ofed'] }, invalidAt: null },
  { name: 'loadsAfter a name no driver can have', spec: { ...base, loadsAfter: ['OFED'] }, invalidAt: 'spec.loadsAfter[0]' },
  { name: 'a driver that loads after itself', spec: { ...base, loadsAfter: ['ofed', 'gpu'] }, invalidAt: 'spec.loadsAfter[1]', runtimeOnly: true },
  { name: 'NIC driver with podDeletion and drain left to its defaults', spec: { driverName: 'ofed', selector: { matchLabels: { app: 'ofed' } }, upgradePolicy: { podDeletion: {}, drain: { force: true } } }, invalidAt: null },
  { name: 'pool maxUnavailable 101%', spec: { ...base, pools: [{ name: 'a', nodeSelector: rack, maxUnavailable: '101%' }] }, invalidAt: 'spec.pools[0].maxUnavailable' },
  { name: 'pool maxParallelUpgrades -2', spec: { ...base, pools: [{ name: 'a', nodeSelector: rack, maxParallelUpgrades: -2 }] }, invalidAt: 'spec.pools[0].maxParallelUpgrades' },
  { name: 'maxFailedNodes 0', spec: { ...base, maxFailedNodes: 0 }, invalidAt: 'spec.maxFailedNodes' },
  { name: 'priorityLabel not a label key', spec: { ...base, priorityLabel: 'not a label' }, invalidAt: 'spec.priorityLabel' },
  { name: 'drain podSelector with broken syntax', spec: withPolicy({ drain: { podSelector: 'app in (a' } }), invalidAt: 'spec.upgradePolicy.drain.podSelector', runtimeOnly: true },
  { name: 'validation podSelector with a bad key', spec: withPolicy({ validation: { podSelector: 'a b=c' } }), invalidAt: 'spec.upgradePolicy.validation.podSelector', runtimeOnly: true },
  // Hostile input (issue 15): wrong types, impossible numbers, very long strings.
  { name: 'maxUnavailable "150%"', spec: withPolicy({ maxUnavailable: '150%' }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable "abc%"', spec: withPolicy({ maxUnavailable: 'abc%' }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable "-5%"', spec: withPolicy({ maxUnavailable: '-5%' }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable "12.5%"', spec: withPolicy({ maxUnavailable: '12.5%' }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxUnavailable true', spec: withPolicy({ maxUnavailable: true }), invalidAt: 'spec.upgradePolicy.maxUnavailable' },
  { name: 'maxParallelUpgrades 2^53', spec: withPolicy({ maxParallelUpgrades: 2 ** 53 }), invalidAt: 'spec.upgradePolicy.maxParallelUpgrades', runtimeOnly: true },
  { name: 'maxParallelUpgrades "2"', spec: withPolicy({ maxParallelUpgrades: '2' }), invalidAt: 'spec.upgradePolicy.maxParallelUpgrades' },
  { name: 'upgradePolicy a list', spec: { ...base, upgradePolicy: [] }, invalidAt: 'spec.upgradePolicy' },
  { name: 'pools a string', spec: { ...base, pools: 'a' }, invalidAt: 'spec.pools' },
  { name: 'maxFailedNodes -3', spec: { ...base, maxFailedNodes: -3 }, invalidAt: 'spec.maxFailedNodes' },
  { name: 'driverName empty', spec: { ...base, driverName: '' }, invalidAt: 'spec.driverName' },
  { name: 'driverName with a slash', spec: { ...base, driverName: 'gpu/x' }, invalidAt: 'spec.driverName' },
  { name: 'driverName 10,000 characters', spec: { ...base, driverName: 'a'.repeat(10_000) }, invalidAt: 'spec.driverName' },
  { name: 'pool name 300 characters', spec: { ...base, pools: [{ name: 'a'.repeat(300), nodeSelector: rack }] }, invalidAt: 'spec.pools[0].name' },
  { name: 'keyDomain 400 characters', spec: { ...base, keyDomain: `${'a.'.repeat(200)}com` }, invalidAt: 'spec.keyDomain' },
  { name: 'selector label value a number', spec: { ...base, selector: { matchLabels: { app: 5 } } }, invalidAt: 'spec.selector.matchLabels.app' },
  { name: 'drain podSelector a number', spec: withPolicy({ drain: { podSelector: 5 } }), invalidAt: 'spec.upgradePolicy.drain.podSelector' },
  { name: 'drain podSelector 10,000 characters', spec: withPolicy({ drain: { podSelector: 'a='.repeat(5_000) } }), invalidAt: 'spec.upgradePolicy.drain.podSelector' },
  { name: 'selector label value no label can have', spec: { ...base, selector: { matchLabels: { app: 'a b' } } }, invalidAt: 'spec.selector', runtimeOnly: true },
  { name: 'pool selector key no label can have', spec: { ...base, pools: [{ name: 'a', nodeSelector: { matchExpressions: [{ key: 'bad key', operator: 'Exists' }] } }] }, invalidAt: 'spec.pools[0].nodeSelector', runtimeOnly: true },
  {
    name: 'a canary of two rack-a nodes that soaks and rolls back on failure',
    spec: { ...base, canary: { nodes: 2, selector: rack, then: 'Continue', soakSeconds: 60 }, onCanaryFailure: 'Rollback' },
    invalidAt: null,
  },
  { name: 'a canary of 10% that waits for approval', spec: { ...base, canary: { nodes: '10%' } }, invalidAt: null },
  { name: 'canary of 0 nodes', spec: { ...base, canary: { nodes: 0 } }, invalidAt: 'spec.canary.nodes' },
  { name: 'canary of "0%"', spec: { ...base, canary: { nodes: '0%' } }, invalidAt: 'spec.canary.nodes' },
  { name: 'canary without nodes', spec: { ...base, canary: { then: 'Pause' } }, invalidAt: 'spec.canary.nodes' },
  { name: 'canary then "Later"', spec: { ...base, canary: { nodes: 1, then: 'Later' } }, invalidAt: 'spec.canary.then' },
  { name: 'canary soakSeconds -1', spec: { ...base, canary: { nodes: 1, soakSeconds: -1 } }, invalidAt: 'spec.canary.soakSeconds' },
  { name: 'onCanaryFailure "Retry"', spec: { ...base, onCanaryFailure: 'Retry' }, invalidAt: 'spec.onCanaryFailure' },
];
