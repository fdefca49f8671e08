/**
 * glibc malloc settings the coordinator runs with: its container's environment
 * (manifests/coordinator.yaml, the chart's coordinator Deployment) and the benchmarks that start
 * it as a pod would (bench/suites/memory.ts, rollout.ts). A unit test keeps the manifests in step.
 *
 * glibc quirk: setting either threshold turns off glibc's dynamic mmap threshold, which rises
 * after the first large buffer is freed, so buffers over 128 KiB (made while the initial lists
 * arrive) stay out of malloc's main heap, where freed memory below a live allocation is
 * never given back; and two arenas instead of up to eight per core for Node's threads (libuv
 * pool, V8 platform workers). Measured on the coordinator synced over 5,000 nodes / 50,000 pods
 * (real API server, load 11-29): resident set 284 MB (283-287, 3 runs) -> 236 MB (231-239, 4
 * runs), malloc's main heap 79-83 -> 32-42 MB; the thresholds alone 244 MB, two arenas alone
 * 280 MB. Cost: CPU time of the initial sync, pod and node informers alone, 9.6 -> 10.3 s (means
 * of 3 alternating runs each).
 */
export const COORDINATOR_ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_TRIM_THRESHOLD_: '131072',
};
