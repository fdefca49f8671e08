import { defineConfig } from 'vitest/config';
import { SummaryLineReporter } from './test/reporters/summary-line-reporter.ts';

// One `vitest run` runs every project: unit tests need nothing; integration tests get a real
// control plane from test/bed/global-setup.ts; the images project builds the Dockerfiles with
// buildah; kernel tests boot a real Linux kernel under QEMU; vendor-drivers tests build real vendor
// drivers (test/vendor-drivers/global-setup.ts).
export const config = defineConfig({
  test: {
    reporters: ['default', new SummaryLineReporter()],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/bed/global-setup.ts'],
          // The machine has 2 cores and one shared control plane: files run one after another.
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 600_000,
        },
      },
      {
        test: {
          // The images, built with buildah (test/images/build-images.sh; cached by their inputs).
          name: 'images',
          include: ['test/images/**/*.test.ts'],
          testTimeout: 300_000,
          hookTimeout: 3_600_000,
        },
      },
      {
        test: {
          // One real kubelet node (containerd, runc) running the project's images beside KWOK
          // nodes: one bring-up shared by the project's files (test/real-node/README.md).
          name: 'real-node',
          include: ['test/real-node/**/*.test.ts'],
          globalSetup: ['test/real-node/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 600_000,
          hookTimeout: 600_000,
        },
      },
      {
        test: {
          name: 'kernel',
          include: ['test/kernel/**/*.test.ts'],
          fileParallelism: false,
          // The guest runs under TCG emulation on one core: on a busy 2-core machine one scenario
          // took over 120 s. Bounds here only catch a hang.
          testTimeout: 600_000,
          hookTimeout: 600_000,
        },
      },
      {
        test: {
          name: 'vendor-drivers',
          include: ['test/vendor-drivers/**/*.test.ts'],
          // Fetches Debian's vendor driver packages and builds them with the agent's recipes,
          // cached in ~/.cache/driver-rollout: a cold NVIDIA build is ~20 CPU-minutes.
          globalSetup: ['test/vendor-drivers/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 600_000,
          hookTimeout: 5_400_000,
        },
      },
    ],
  },
});

// vitest's config loader needs a default export; this is the one allowed.
// eslint-disable-next-line no-restricted-syntax
export default config;
