/**
 * Fuzzing (fast-check) of every parser that reads input we do not control: the DriverRollout
 * spec, label selectors, label keys, and what the agent reads from the host (modinfo,
 * `modprobe --show-depends`, modules.order, modprobe.d, /sys/module, PCI sysfs). Each must give a
 * result or a clear error, never crash with something else, and never hang (a super-linear
 * regular expression would show as a test timeout on the long inputs below).
 */
import fc from 'fast-check';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseModinfo } from '../../../agent/build/read-module-info.ts';
import { parseModulesOrder } from '../../../agent/build/run-kbuild.ts';
import { readPciDevices, SysfsUnreadableError } from '../../../agent/detect/read-pci-devices.ts';
import { parseModprobeConfig } from '../../../agent/kernel/plan/modprobe-config.ts';
import { parseShowDepends } from '../../../agent/kernel/real-kernel.ts';
import { parseDriverRolloutSpec } from '../../../coordinator/policy/driver-rollout-spec.ts';
import { compileLabelSelector, parseLabelSelector } from '../../../coordinator/policy/label-selector.ts';
import { driverKeys, parseUpgradeStateKey } from '../../../shared/keys.ts';
import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';

const RUNS = { numRuns: 300 };

/** Text made of the tokens a parser splits on, so that inputs reach its deeper branches. */
const tokenText = (tokens: readonly string[], maxLength = 40): fc.Arbitrary<string> =>
  fc.array(fc.oneof(fc.constantFrom(...tokens), fc.string({ maxLength: 6 })), { maxLength }).map((parts) => parts.join(''));

/** Long runs of one character: what makes a backtracking regular expression hang. */
const longRuns = fc.tuple(fc.constantFrom(' ', '\t', ':', ',', '=', '(', '!', 'a', '-', '.', '/', '%', '0'), fc.integer({ min: 1_000, max: 20_000 }), fc.string({ maxLength: 3 })).map(([c, n, tail]) => c.repeat(n) + tail);

const intOrPercentish = fc.oneof(
  fc.integer(), fc.double(), fc.constantFrom('150%', 'abc%', '-1%', '%', '10', '1e3%', '99.5%', ' 5%', '0%', '100%', '1000000000000%', ''),
  fc.string({ maxLength: 8 }), fc.constant(null), fc.boolean(), fc.array(fc.integer(), { maxLength: 2 }),
);
/** Label selectors in object form: what compileLabelSelector takes (after the schema checked the shape). */
const selectorObjects = fc.oneof(
  fc.record({ matchLabels: fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 })) }, { requiredKeys: [] }),
  fc.record({ matchExpressions: fc.array(fc.record({ key: fc.string({ maxLength: 8 }), operator: fc.constantFrom('In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', ''), values: fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }) }, { requiredKeys: ['key', 'operator'] }), { maxLength: 3 }) }),
);
const selectorish = fc.oneof(
  fc.string({ maxLength: 30 }), tokenText(['app', '=', '==', '!=', ',', ' in ', ' notin ', '(', ')', '!', 'x/y', '-', '.']),
  selectorObjects,
  fc.record({ matchLabels: fc.dictionary(fc.string({ maxLength: 10 }), fc.oneof(fc.string({ maxLength: 10 }), fc.integer())) }, { requiredKeys: [] }),
  fc.anything(),
);
/** DriverRollout specs: the right shape with hostile values, and anything at all. */
const specish = fc.oneof(
  fc.record({
    driverName: fc.oneof(fc.constantFrom('gpu', 'ofed', 'GPU', '', 'a'.repeat(300), 'gpu/x'), fc.string({ maxLength: 20 }), fc.integer()),
    selector: selectorish,
    maxFailedNodes: fc.oneof(fc.integer(), fc.constant(-1), fc.string({ maxLength: 3 })),
    keyDomain: fc.oneof(fc.constantFrom('nvidia.com', 'example.com', '-x-', ''), fc.string({ maxLength: 10 })),
    upgradePolicy: fc.oneof(
      fc.record({
        autoUpgrade: fc.oneof(fc.boolean(), fc.string({ maxLength: 4 })),
        maxParallelUpgrades: intOrPercentish,
        maxUnavailable: intOrPercentish,
        drain: fc.record({ enable: fc.anything(), timeoutSeconds: intOrPercentish, podSelector: selectorish }, { requiredKeys: [] }),
        waitForCompletion: fc.record({ podSelector: selectorish, timeoutSeconds: intOrPercentish }, { requiredKeys: [] }),
        unknownField: fc.anything(),
      }, { requiredKeys: [] }),
      fc.anything(),
    ),
    pools: fc.oneof(fc.array(fc.record({ name: fc.oneof(fc.constantFrom('a', 'default', 'A', ''), fc.string({ maxLength: 70 })), nodeSelector: selectorish, maxUnavailable: intOrPercentish, maxParallelUpgrades: intOrPercentish }, { requiredKeys: [] }), { maxLength: 4 }), fc.anything()),
    extra: fc.anything(),
  }, { requiredKeys: [] }),
  fc.anything(),
);

describe('fuzz: the coordinator’s input', () => {
  it('parseDriverRolloutSpec: a policy, or problems each naming a spec field path', () => {
    fc.assert(
      fc.property(specish, (spec) => {
        const result = parseDriverRolloutSpec(spec);
        if (result.ok) return;
        expect(result.problems.length).toBeGreaterThan(0);
        for (const p of result.problems) {
          expect(p.path).toMatch(/^spec(\.|\[|$)/);
          expect(p.message.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 1_000 },
    );
  });

  it('parseLabelSelector and compileLabelSelector: a selector or a message, on any text or object', () => {
    fc.assert(
      fc.property(fc.oneof(tokenText(['app', 'a.b/c', '=', '==', '!=', ',', ' in ', ' notin ', '(', ')', '!', ' ', 'x', '-', '_']), fc.string(), longRuns), (text) => {
        const result = parseLabelSelector(text);
        if (!result.ok) expect(result.message.length).toBeGreaterThan(0);
      }),
      RUNS,
    );
    fc.assert(
      fc.property(selectorObjects, (object) => {
        const result = compileLabelSelector(object);
        if (!result.ok) expect(result.message.length).toBeGreaterThan(0);
      }),
      RUNS,
    );
  });

  it('parseUpgradeStateKey: undefined or the driver whose keys it names, on any text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), tokenText(['nvidia.com', '/', '-driver-upgrade-state', 'gpu', '.', '-']), longRuns), (key) => {
        const owner = parseUpgradeStateKey(key);
        if (owner !== undefined) expect(driverKeys(owner.driver, owner.domain).upgradeState).toBe(key);
      }),
      RUNS,
    );
  });
});

describe('fuzz: what the agent reads from the host', () => {
  const modinfoLines = ['filename:', 'name:', 'srcversion:', 'version:', 'depends:', 'vermagic:', 'parm:', 'alias:', ' ', '\n', ':', ',', 'drsample', '6.1.0-18-amd64 SMP', 'x:int'];

  it('parseModinfo: every field a string or absent, on any text', () => {
    fc.assert(
      fc.property(fc.oneof(tokenText(modinfoLines, 80), fc.string(), longRuns), fc.string({ maxLength: 30 }), (text, file) => {
        const info = parseModinfo(text, file);
        expect(typeof info.name).toBe('string');
        for (const d of info.dependsOn) expect(d).not.toBe('');
      }),
      RUNS,
    );
  });

  it('parseShowDepends, parseModulesOrder, parseModprobeConfig: results, never a crash, on any text', () => {
    const lines = ['insmod ', 'builtin ', '/lib/modules/x/', '.ko', '.ko.xz', 'options ', 'blacklist ', 'install ', '#', '"', '=', ' ', '\n', 'a-b', 'p=1'];
    fc.assert(
      fc.property(fc.oneof(tokenText(lines, 80), fc.string(), longRuns), (text) => {
        for (const step of parseShowDepends(text)) expect(step.module).not.toMatch(/-/);
        expect(Array.isArray(parseModulesOrder(text, '/build'))).toBe(true);
        const config = parseModprobeConfig([text, text]);
        for (const name of config.blacklist) expect(name).not.toMatch(/-/);
      }),
      RUNS,
    );
  });
});

describe('fuzz: sysfs trees with hostile contents', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'fuzz-sysfs-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });
  const content = fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('', '-1', '0x10de', '0x', 'NaN', '99999999999999999999', '\n\n', '1\n2'));
  let run = 0;

  it('readLoadedModule (/sys/module): a module or undefined, whatever the files hold', async () => {
    await fc.assert(
      fc.asyncProperty(content, content, fc.array(fc.stringMatching(/^[a-z_]{1,8}$/), { maxLength: 3 }), content, async (refcnt, srcversion, holders, param) => {
        const dir = join(root, `m${run++}`, 'drsample');
        await mkdir(join(dir, 'holders'), { recursive: true });
        await mkdir(join(dir, 'parameters'), { recursive: true });
        await writeFile(join(dir, 'refcnt'), refcnt);
        await writeFile(join(dir, 'srcversion'), srcversion);
        await writeFile(join(dir, 'parameters', 'p'), param);
        for (const h of holders) await mkdir(join(dir, 'holders', h), { recursive: true });
        const module = await readLoadedModule(join(dir, '..'), 'drsample');
        expect(module?.name).toBe('drsample');
        expect(Number.isInteger(module?.refcnt)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('readPciDevices (bus/pci/devices): devices with string fields, or SysfsUnreadableError', async () => {
    await fc.assert(
      fc.asyncProperty(content, content, content, content, async (vendor, device, classCode, numa) => {
        const sys = join(root, `p${run++}`);
        const dev = join(sys, 'bus', 'pci', 'devices', '0000:01:00.0');
        await mkdir(dev, { recursive: true });
        await writeFile(join(dev, 'vendor'), vendor);
        await writeFile(join(dev, 'device'), device);
        await writeFile(join(dev, 'class'), classCode);
        await writeFile(join(dev, 'numa_node'), numa);
        const devices = await readPciDevices(sys);
        expect(devices).toHaveLength(1);
        expect(typeof devices[0]?.vendor).toBe('string');
        const numaNode = devices[0]?.numaNode;
        if (numaNode !== undefined) expect(Number.isInteger(numaNode) && numaNode >= 0).toBe(true);
      }),
      { numRuns: 60 },
    );
    await expect(readPciDevices(join(root, 'no-such-sysfs'))).rejects.toBeInstanceOf(SysfsUnreadableError);
  });
});
