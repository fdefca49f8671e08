/**
 * A node whose kernel would refuse the new driver's modules (module.sig_enforce, lockdown, Secure
 * Boot) does not start: cordoned and drained, it would only end in the agent's
 * ModuleSignatureUntrusted. The agent's verdict (shared/module-signature-verdict.ts, the node
 * annotation `driver-rollout.io/<driver>-driver.module-signatures`) counts only when it is about
 * the driver the newest template of every driver DaemonSet with a pod on the node loads (the same
 * fingerprint as restart-only.ts compares): a verdict about another build, the one the node runs
 * now included, neither holds nor releases the node, and a template whose driver is unknown
 * (`valueFrom`, flags) is not judged. A node that restarts only (the template loads the driver
 * already loaded, restart-only.ts) loads nothing, so nothing is refused. A verdict that does not parse holds the node, naming the
 * problem: it is never read as "trusted".
 */
import { describeRefusal, isRefused } from '../../shared/module-signature-verdict.ts';
import { NodeAnnotationProblem, parseNodeAnnotation, SIGNATURE_VERDICT } from '../../shared/node-annotations.ts';
import { canRestartOnly } from './restart-only.ts';
import type { StartCheck, StartHold } from './start-checks.ts';

/** Only a change in the cluster lifts it: a new verdict, a new template. */
const held = (text: string): StartHold => ({ reason: { code: 'module-signature-untrusted', message: text, detail: text }, wakeAt: null });

export const isRefusedBySignatures: StartCheck = (node, ctx) => {
  const key = ctx.policy.keys.moduleSignatures;
  const raw = node.view.annotations[key];
  if (raw === undefined) return null;
  const name = node.view.snapshot.name;
  const verdict = parseNodeAnnotation(SIGNATURE_VERDICT, `node/${name}`, key, raw);
  if (verdict === undefined) return null;
  if (verdict instanceof NodeAnnotationProblem) {
    return held(`not started: ${verdict.message}; the agent writes it again at its next load`);
  }
  if (!isRefused(verdict)) return null;
  const pods = node.driver.pods;
  if (pods.length === 0 || pods.some((p) => (ctx.fingerprints.get(p.daemonSet) ?? null) !== verdict.fingerprint)) return null;
  if (canRestartOnly(node, ctx) !== null) return null;
  return held(`not started: kernel ${verdict.kernel}: ${describeRefusal(`the ${ctx.policy.keys.driver} driver of the newest template`, verdict)}; starts once the agent on the node reports them trusted`);
};
