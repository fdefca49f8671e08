/**
 * glibc malloc settings the coordinator runs with: its container's environment
 * (manifests/coordinator.yaml, the chart's coordinator Deployment) and the benchmarks that start
 * it as a pod would (bench/suites/memory.ts, rollout.ts). A unit test keeps the manifests in step.
 *
 * glibc quirk: setting either threshold turns off glibc's dynamic mmap threshold, which rises
 * after the first large buffer is freed, so buffers over 128 KiB (made while the initial lists
 * arrive) stay out of malloc's main heap, where freed memory below a live allocation is
 * never given back; and two arenas instead of up to eight per core for Node's threads (libuv
 * pool, V8 platform workers). What it saves and costs: docs/decisions/0005-coordinator-memory.md.
 */
export const COORDINATOR_ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_TRIM_THRESHOLD_: '131072',
};
