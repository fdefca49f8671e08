/**
 * What NVIDIA's container toolkit looks up in a driver root for the `utility` and `compute`
 * capabilities (libnvidia-container, src/nvc_info.c): libraries by the prefix of their name in the
 * root's `/etc/ld.so.cache` (then the resolved file must end in `.so.<driver version>`), binaries
 * under the root's `PATH` directories. The driver images' root must answer every one of these;
 * the names the toolkit also knows that Debian does not package for 535 are listed apart, so a
 * reader sees what the root cannot offer and why.
 */
export const TOOLKIT_LIBRARIES: readonly string[] = [
  // utility
  'libnvidia-ml.so',
  'libnvidia-cfg.so',
  // compute
  'libcuda.so',
  'libcudadebugger.so',
  'libnvidia-ptxjitcompiler.so',
  'libnvidia-allocator.so',
  'libnvidia-pkcs11-openssl3.so',
  'libnvidia-nvvm.so',
];

export const TOOLKIT_BINARIES: readonly string[] = ['nvidia-smi', 'nvidia-persistenced', 'nvidia-cuda-mps-control', 'nvidia-cuda-mps-server'];

/** The directories the toolkit's hook searches for binaries (its PATH), in the root. */
export const TOOLKIT_BINARY_DIRS: readonly string[] = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** Names of the toolkit's lists that no Debian 12 package of the 535 releases ships, and why. */
export const TOOLKIT_NAMES_NOT_PACKAGED: Readonly<Record<string, string>> = {
  'libnvidia-nscq.so': 'NVSwitch topology: comes with the fabric manager, which Debian does not package',
  'libnvidia-opencl.so': 'OpenCL ICD (nvidia-opencl-icd): not part of the compute capability CUDA needs',
  'libnvidia-pkcs11.so': 'the OpenSSL 1.1 build; Debian 12 ships the OpenSSL 3 one',
  'libnvidia-gpucomp.so': 'newer releases only',
  'libnvidia-fatbinaryloader.so': 'older releases only',
  'libnvidia-compiler.so': 'older releases only',
  'libnvidia-tileiras.so': 'newer releases only',
  'nvidia-debugdump': 'not packaged by Debian',
  'nv-fabricmanager': 'not packaged by Debian',
};

/**
 * The update-alternatives links Debian's `nvidia-alternative` postinst makes for these files (its
 * `add_slave`/`add_multiarch_slave` list, x86_64 only): `link → /etc/alternatives/<name> →
 * target` on an installed system; a link is made only when its target exists, as the postinst
 * does. `{version}` is the driver's upstream release.
 */
export const NVIDIA_ALTERNATIVES: readonly { readonly link: string; readonly name: string; readonly target: string }[] = [
  { link: '/usr/lib/nvidia/nvidia', name: 'nvidia', target: '/usr/lib/nvidia/current' },
  ...[
    'libcuda.so.1',
    'libcuda.so',
    'libcudadebugger.so.1',
    'libnvidia-allocator.so.1',
    'libnvidia-ml.so.1',
    'libnvidia-nvvm.so.4',
    'libnvidia-nvvm.so.{version}',
    'libnvidia-opencl.so.1',
    'libnvidia-ptxjitcompiler.so.1',
  ].map((file) => ({
    link: `/usr/lib/x86_64-linux-gnu/${file}`,
    name: `nvidia--${file}-x86_64-linux-gnu`,
    target: `/usr/lib/x86_64-linux-gnu/nvidia/current/${file}`,
  })),
  {
    link: '/usr/lib/x86_64-linux-gnu/nvidia/libnvidia-cfg.so.1',
    name: 'nvidia--libnvidia-cfg.so.1-x86_64-linux-gnu',
    target: '/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-cfg.so.1',
  },
  { link: '/usr/bin/nvidia-smi', name: 'nvidia--nvidia-smi', target: '/usr/lib/nvidia/current/nvidia-smi' },
  { link: '/usr/bin/nvidia-debugdump', name: 'nvidia--nvidia-debugdump', target: '/usr/lib/nvidia/current/nvidia-debugdump' },
];
