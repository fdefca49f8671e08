import { describe, expect, it } from 'vitest';
import { CHURN_WRITERS, churnDueMs, churnGeneration, GFD_WRITER, labelPatch, lostChurnLabels, NFD_WRITER } from '../../../../bench/lib/label-churn.ts';
import { driverKeys, OWN_KEY_DOMAIN } from '../../../../shared/keys.ts';

const ourKeys = (driver: string): string[] => Object.values(driverKeys(driver)).filter((v): v is string => typeof v === 'string' && v.includes('/'));

describe('the label churn writers', () => {
  it.each(CHURN_WRITERS.map((w) => [w.name, w] as const))('%s writes none of our keys, under its own domain only', (_, writer) => {
    const keys = Object.keys(writer.labels(1));
    for (const driver of ['bench', 'gpu', 'ofed']) expect(keys.filter((k) => ourKeys(driver).includes(k))).toEqual([]);
    expect(keys.filter((k) => k.startsWith(`${OWN_KEY_DOMAIN}/`))).toEqual([]);
    const prefix = writer === NFD_WRITER ? 'feature.node.kubernetes.io/' : 'nvidia.com/g';
    expect(keys.every((k) => k.startsWith(prefix))).toBe(true);
  });

  it.each(CHURN_WRITERS.map((w) => [w.name, w] as const))('%s changes a value every generation, so every write stores a new resourceVersion', (_, writer) => {
    expect(writer.labels(2)).not.toEqual(writer.labels(1));
    expect(Object.keys(writer.labels(2))).toEqual(Object.keys(writer.labels(1)));
  });

  it('GFD-style labels carry gfd.timestamp, as GFD writes it every interval', () => {
    expect(GFD_WRITER.labels(7)['nvidia.com/gfd.timestamp']).not.toBe(GFD_WRITER.labels(8)['nvidia.com/gfd.timestamp']);
  });
});

describe('labelPatch', () => {
  it('adds each label by its path, "/" escaped as ~1 and "~" as ~0 (RFC 6901)', () => {
    expect(labelPatch({ 'nvidia.com/gpu.count': '8', 'a~b': 'x' })).toEqual([
      { op: 'add', path: '/metadata/labels/nvidia.com~1gpu.count', value: '8' },
      { op: 'add', path: '/metadata/labels/a~0b', value: 'x' },
    ]);
  });
});

describe('lostChurnLabels', () => {
  const carrying = (generation: number): Record<string, string> => ({ ...NFD_WRITER.labels(generation), ...GFD_WRITER.labels(generation), other: 'kept' });

  it('is empty when every node carries what each writer stored last', () => {
    const nodes = new Map([['n1', carrying(3)], ['n2', carrying(4)]]);
    expect(lostChurnLabels(nodes, { nfd: { n1: 3, n2: 4 }, gfd: { n1: 3, n2: 4 } })).toEqual([]);
  });

  it('names each label a node lacks or carries with an older value', () => {
    const n1 = carrying(3);
    delete n1['feature.node.kubernetes.io/pci-10de.present'];
    const nodes = new Map([['n1', n1], ['n2', carrying(3)]]);
    expect(lostChurnLabels(nodes, { nfd: { n1: 3 }, gfd: { n2: 4 } })).toEqual([
      'nfd/n1/feature.node.kubernetes.io/pci-10de.present',
      'gfd/n2/nvidia.com/gfd.timestamp',
    ]);
  });

  it('counts every label of a node that is gone', () => {
    expect(lostChurnLabels(new Map(), { gfd: { gone: 1 } })).toHaveLength(Object.keys(GFD_WRITER.labels(1)).length);
  });

  it('expects nothing of a node a writer never stored', () => {
    expect(lostChurnLabels(new Map([['n1', {}]]), { nfd: {}, gfd: {} })).toEqual([]);
  });
});

describe('the churn schedule', () => {
  const count = 4;
  const intervalMs = 2_000;

  it('writes each node once per interval per writer, at the generation of its round', () => {
    const dues = Array.from({ length: 2 * count }, (_, s) => churnDueMs(s, count, intervalMs, 0, 2));
    expect(dues).toEqual([0, 500, 1_000, 1_500, 2_000, 2_500, 3_000, 3_500]);
    expect(Array.from({ length: 2 * count }, (_, s) => churnGeneration(s, count))).toEqual([1, 1, 1, 1, 2, 2, 2, 2]);
  });

  it('shifts the second writer by half the interval, so a node is written at even spacing by the writers in turn', () => {
    const first = churnDueMs(count + 1, count, intervalMs, 0, 2);
    const second = churnDueMs(count + 1, count, intervalMs, 1, 2);
    expect(second - first).toBe(intervalMs / 2);
  });
});
