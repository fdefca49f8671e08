/**
 * A device client for the process kubelet (a device plugin, DCGM exporter ... in a test): holds
 * the driver's device file `$SIMULATED_DEVICE_DIR/$DEVICE_MODULE` open, as a GPU client holds
 * /dev/nvidia0, so the simulated kernel counts it in the module's refcnt. Waits for the file
 * while the driver is not loaded; closes it and exits 0 on SIGTERM. Test-only: no image has it.
 *
 *   SIMULATED_DEVICE_DIR=/tmp/node/dev DEVICE_MODULE=drsample_net node test/doubles/simulated-device-client.ts
 */
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const dir = process.env.SIMULATED_DEVICE_DIR;
const module = process.env.DEVICE_MODULE;
if (dir === undefined || module === undefined) {
  process.stderr.write('SIMULATED_DEVICE_DIR and DEVICE_MODULE are required\n');
  process.exit(2);
}
const path = join(dir, module);
const stop = new AbortController();
// Neither a signal listener, an open FileHandle nor a pending promise keeps Node's event loop
// alive: without a ref'd handle the process ends right after opening the file ("unsettled
// top-level await", exit 13) and lets go of it. This timer is that handle until SIGTERM.
const keepAlive = setInterval(() => undefined, 3_600_000);
process.once('SIGTERM', () => {
  clearInterval(keepAlive);
  stop.abort();
});

let device: FileHandle | undefined;
let waiting = false;
while (device === undefined && !stop.signal.aborted) {
  try {
    device = await open(path, 'r');
    process.stdout.write(`holding ${path} open (pid ${process.pid})\n`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    if (!waiting) process.stdout.write(`waiting for ${path}\n`);
    waiting = true;
    await sleep(500, undefined, { signal: stop.signal }).catch(() => undefined);
  }
}
await new Promise<void>((resolve) => {
  if (stop.signal.aborted) resolve();
  else {
    stop.signal.addEventListener('abort', () => {
      resolve();
    }, { once: true });
  }
});
await device?.close();
process.stdout.write(`closed ${path}\n`);
process.exit(0);
