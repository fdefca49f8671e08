import { join } from 'node:path';

/**
 * Captures made by scripts/capture-gpu-node.sh, committed as fixtures (`<capture>/sys` is a
 * SYSFS_ROOT). `qemu-guest`: Debian's kernel under QEMU (test/kernel/capture-gpu-node.test.ts
 * makes and checks it) with its virtio functions and the sample driver 1.0.0 loaded; no GPU.
 */
export const CAPTURES_DIR = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'captures');
export const QEMU_GUEST_CAPTURE = join(CAPTURES_DIR, 'qemu-guest');
