import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';

const RUN_IN_IMAGE = join(import.meta.dirname, 'run-in-image.sh');

/**
 * Copies a directory out of an image's docker-archive (as a runtime would unpack the image) into
 * `dest`: `tar` inside the image, unpacked here. What a test reads is then exactly what the image
 * ships.
 */
export async function extractFromImage(archive: string, dirInImage: string, dest: string): Promise<void> {
  await mkdir(dest, { recursive: true });
  const packed = await execa('bash', [RUN_IN_IMAGE, archive, '--', 'tar', '-C', dirInImage, '-cf', '-', '.'], { encoding: 'buffer', maxBuffer: 1024 * 1024 * 1024 });
  await execa('tar', ['-C', dest, '-xf', '-'], { input: packed.stdout });
}
