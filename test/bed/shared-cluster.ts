import { KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin kubeconfig of the `full` control plane that test/bed/global-setup.ts started. */
    kubeconfigPath: string;
    /** Directory of the test bed's binaries (kubectl, ...). */
    testBedBinDir: string;
  }
}

/** Inside an integration test: the one shared `full` control plane of this run. */
export function sharedCluster(): { kubeconfigPath: string; binDir: string; kubeConfig(): KubeConfig } {
  const kubeconfigPath = inject('kubeconfigPath');
  return {
    kubeconfigPath,
    binDir: inject('testBedBinDir'),
    kubeConfig: () => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      return kc;
    },
  };
}
