import { describe, expect, it } from 'vitest';
import { sumOfSamples } from '../../../../bench/lib/api-server-metrics.ts';

const TEXT = [
  '# HELP apiserver_longrunning_requests [ALPHA] Gauge of all active long-running apiserver requests',
  '# TYPE apiserver_longrunning_requests gauge',
  'apiserver_longrunning_requests{component="apiserver",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH"} 1',
  'apiserver_longrunning_requests{component="apiserver",group="",resource="nodes",scope="resource",subresource="",verb="WATCH"} 2',
  'apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH"} 7',
  'apiserver_longrunning_requests_total{resource="nodes",verb="WATCH"} 99',
  'nodejs_heap_size_used_bytes 1048576',
].join('\n');

describe('sumOfSamples', () => {
  it('adds every sample of the metric whose labels include the wanted ones', () => {
    expect(sumOfSamples(TEXT, 'apiserver_longrunning_requests', { resource: 'nodes', verb: 'WATCH' })).toBe(3);
    expect(sumOfSamples(TEXT, 'apiserver_longrunning_requests', { resource: 'pods' })).toBe(7);
    expect(sumOfSamples(TEXT, 'apiserver_longrunning_requests', { resource: 'leases' })).toBe(0);
  });

  it('reads a sample without labels, and never one of a metric whose name only starts alike', () => {
    expect(sumOfSamples(TEXT, 'nodejs_heap_size_used_bytes', {})).toBe(1_048_576);
    expect(sumOfSamples(TEXT, 'apiserver_longrunning_requests', {})).toBe(10);
  });
});
