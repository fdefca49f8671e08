import { DriverRolloutError } from '../../shared/errors.ts';

/** A supervised daemon (nvidia-persistenced, nv-fabricmanager) is down: it exited or never started; it is being restarted with backoff. */
export class DaemonFailedError extends DriverRolloutError {
  readonly daemon: string;

  constructor(fields: { readonly daemon: string; readonly restarts: number; readonly lastFailure: string }) {
    super(`${fields.daemon} is not running: ${fields.lastFailure} (restart ${fields.restarts}, retried with backoff)`, fields);
    this.daemon = fields.daemon;
  }
}

/** NVSwitch devices are present and the driver root has no fabric manager: CUDA would fail on every GPU. */
export class FabricManagerMissingError extends DriverRolloutError {
  constructor(message: string, fields: { readonly nvSwitches: readonly string[] }) {
    super(`${message}: CUDA fails on every GPU of an NVSwitch system without it; use an image with nv-fabricmanager of the driver's release`, fields);
  }
}
