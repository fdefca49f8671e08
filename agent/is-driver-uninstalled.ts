import type { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { isNotFound } from '../shared/kube/api-error.ts';

/**
 * Whether the driver is being uninstalled rather than restarted: the DaemonSet that owns this
 * pod is gone or being deleted (`helm uninstall` deletes it and the garbage collector then
 * deletes its pods; an upgrade or a pod deletion keeps it). Asked once, on stop. Anything that
 * cannot be read answers false: the host's files stay, which is what a restart needs.
 */
export async function isDriverUninstalled(core: CoreV1Api, apps: AppsV1Api, pod: { readonly name: string; readonly namespace: string }): Promise<boolean> {
  const self = await core.readNamespacedPod(pod);
  const owner = self.metadata?.ownerReferences?.find((o) => o.kind === 'DaemonSet' && o.controller === true);
  if (owner === undefined) return false;
  try {
    const daemonSet = await apps.readNamespacedDaemonSet({ name: owner.name, namespace: pod.namespace });
    return daemonSet.metadata?.uid !== owner.uid || daemonSet.metadata.deletionTimestamp !== undefined;
  } catch (error) {
    if (isNotFound(error)) return true;
    throw error;
  }
}
