import { describe, expect, it } from 'vitest';
import { BuildConfigError } from '../../../../agent/build/build-errors.ts';
import { expandBuildVariables, machineOf, type BuildPlaceholders } from '../../../../agent/build/expand-build-variables.ts';

const node: BuildPlaceholders = {
  kernel: '6.1.0-56-amd64',
  kernelSource: '/usr/src/linux-headers-6.1.0-56-common',
  kernelOutput: '/usr/src/linux-headers-6.1.0-56-amd64',
  arch: 'x86_64',
  jobs: '2',
  built: { 'mlnx-ofa_kernel': '/work/kept/mlnx-ofa_kernel' },
};

describe('expandBuildVariables', () => {
  it("expands every placeholder per node and keeps values with spaces whole (NVIDIA's NV_KERNEL_MODULES)", () => {
    expect(
      expandBuildVariables(
        {
          NV_KERNEL_SOURCES: '{kernelSource}',
          NV_KERNEL_OUTPUT: '{kernelOutput}',
          NV_KERNEL_MODULES: 'nvidia nvidia-uvm nvidia-modeset nvidia-drm',
          OFA_DIR: '{built:mlnx-ofa_kernel}/{arch}/{kernel}',
          JOBS: '-j{jobs}',
        },
        node,
        'build-recipe.variables',
      ),
    ).toEqual({
      NV_KERNEL_SOURCES: '/usr/src/linux-headers-6.1.0-56-common',
      NV_KERNEL_OUTPUT: '/usr/src/linux-headers-6.1.0-56-amd64',
      NV_KERNEL_MODULES: 'nvidia nvidia-uvm nvidia-modeset nvidia-drm',
      OFA_DIR: '/work/kept/mlnx-ofa_kernel/x86_64/6.1.0-56-amd64',
      JOBS: '-j2',
    });
  });

  it('another node gets its own kernel; {{ and }} are literal braces; text without placeholders is unchanged', () => {
    const other = { ...node, kernel: '6.12.0-1-arm64', arch: 'aarch64' };
    expect(expandBuildVariables({ K: 'x-{kernel}-{arch}', L: '{{kernel}}', M: '$(abs_srctree) a,b' }, other, 'f')).toEqual({
      K: 'x-6.12.0-1-arm64-aarch64',
      L: '{kernel}',
      M: '$(abs_srctree) a,b',
    });
  });

  it('an unknown placeholder or a package not built before is a BuildConfigError naming the variable', () => {
    expect(() => expandBuildVariables({ SYSSRC: '{kernelSrc}' }, node, 'build-recipe.variables')).toThrow(BuildConfigError);
    expect(() => expandBuildVariables({ SYSSRC: '{kernelSrc}' }, node, 'build-recipe.variables')).toThrow(/^build-recipe\.variables\.SYSSRC: unknown placeholder \{kernelSrc\}/);
    expect(() => expandBuildVariables({ OFA: '{built:nope}' }, node, 'build-recipe.packages[1].variables')).toThrow(/build-recipe\.packages\[1\]\.variables\.OFA: \{built:nope\} names no DKMS package built before/);
  });

  it('names machines as uname -m does', () => {
    expect(machineOf('x64')).toBe('x86_64');
    expect(machineOf('arm64')).toBe('aarch64');
  });
});
