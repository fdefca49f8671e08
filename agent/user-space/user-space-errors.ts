import { DriverRolloutError } from '../../shared/errors.ts';

/**
 * The driver root's user space is not of the modules' release (or a required part is missing):
 * CUDA and NVML would refuse the module. Thrown before anything is unloaded; nothing was changed.
 */
export class UserSpaceMismatchError extends DriverRolloutError {
  readonly root: string;

  constructor(fields: { readonly driver: string; readonly root: string; readonly detail: string; readonly moduleVersions: readonly string[]; readonly userSpaceVersions: readonly string[]; readonly missing: readonly string[] }) {
    super(
      `the ${fields.driver} driver's user space in ${fields.root} is not of its modules' release: ${fields.detail}; nothing was unloaded (use an image whose libraries and nvidia-smi come from the modules' release)`,
      fields,
    );
    this.root = fields.root;
  }
}

/** A file of the driver root that should carry a version does not say one (a broken link, an unnamed library, nvidia-smi that prints none). */
export class UserSpaceUnreadableError extends DriverRolloutError {}
