/**
 * A node whose kernel would refuse the new driver's modules (module.sig_enforce, lockdown, Secure
 * Boot) does not start: cordoned and drained, it would only end in the agent's
 * ModuleSignatureUntrusted. Two sources say so, the first that speaks wins:
 * - the agent's verdict about the new build (shared/module-signature-verdict.ts, the node
 *   annotation `driver-rollout.io/<driver>-driver.module-signatures`), when it is about the driver
 *   the newest template of every driver DaemonSet with a pod on the node loads (the same
 *   fingerprint as restart-only.ts compares): it judged the modules themselves, so it holds or
 *   releases the node whatever the template declares;
 * - otherwise, before any agent of the new build has run there: the signer the newest template
 *   declares (shared/keys.ts MODULE_SIGNER_ANNOTATION) against the node's own facts, which the
 *   agent running there now publishes whatever its version
 *   (shared/kernel-signature-policy.ts, `driver-rollout.io/<driver>-driver.kernel-signature-policy`):
 *   a kernel that enforces signatures and trusts no key of that name holds the node. Facts read
 *   under another kernel than the one the node reports running (it rebooted since), a template
 *   that declares no signer, and a node without facts (an older agent) are not judged: such a node
 *   starts as before, and its new agent refuses the modules before unloading anything.
 * A verdict about another build, the one the node runs now included, neither holds nor releases
 * the node. A node that restarts only (the template loads the driver already loaded,
 * restart-only.ts) loads nothing, so nothing is refused. A verdict or facts that do not parse hold
 * the node, naming the problem: never read as "trusted".
 */
import { isSignerTrusted, trustedKeyNames, UNSIGNED } from '../../shared/kernel-signature-policy.ts';
import { MODULE_SIGNER_ANNOTATION } from '../../shared/keys.ts';
import { describeRefusal, isRefused, type RefusedModule } from '../../shared/module-signature-verdict.ts';
import { KERNEL_SIGNATURE_POLICY, NodeAnnotationProblem, parseNodeAnnotation, SIGNATURE_VERDICT } from '../../shared/node-annotations.ts';
import { canRestartOnly } from './restart-only.ts';
import type { StartCheck, StartContext, StartHold } from './start-checks.ts';
import type { NodeContext } from './step.ts';

/** Only a change in the cluster lifts it: a new verdict or facts, a new template. */
const held = (text: string): StartHold => ({ reason: { code: 'module-signature-untrusted', message: text, detail: text }, wakeAt: null });

export const isRefusedBySignatures: StartCheck = (node, ctx) => {
  const pods = node.driver.pods;
  if (pods.length === 0) return null;
  const key = ctx.policy.keys.moduleSignatures;
  const verdict = parseNodeAnnotation(SIGNATURE_VERDICT, `node/${node.view.snapshot.name}`, key, node.view.annotations[key]);
  if (verdict instanceof NodeAnnotationProblem) {
    return held(`not started: ${verdict.message}; the agent writes it again at its next load`);
  }
  const aboutNewBuild = verdict !== undefined && pods.every((p) => (ctx.fingerprints.get(p.daemonSet) ?? null) === verdict.fingerprint);
  const hold = aboutNewBuild
    ? isRefused(verdict)
      ? held(`not started: kernel ${verdict.kernel}: ${describeRefusal(newestDriver(ctx), verdict)}; starts once the agent on the node reports them trusted`)
      : null
    : refusalOfDeclaredSigner(node, ctx);
  if (hold === null || canRestartOnly(node, ctx) !== null) return null;
  return hold;
};

/** The node's own facts against the signers the newest templates of its driver pods declare; null: not refused, or not known. */
function refusalOfDeclaredSigner(node: NodeContext, ctx: StartContext): StartHold | null {
  const declared = new Set<string>();
  for (const p of node.driver.pods) {
    const signer = ctx.signers.get(p.daemonSet) ?? null;
    if (signer !== null) declared.add(signer);
  }
  if (declared.size === 0) return null;
  const key = ctx.policy.keys.kernelSignaturePolicy;
  const facts = parseNodeAnnotation(KERNEL_SIGNATURE_POLICY, `node/${node.view.snapshot.name}`, key, node.view.annotations[key]);
  if (facts === undefined) return null;
  if (facts instanceof NodeAnnotationProblem) return held(`not started: ${facts.message}; the agent writes it again at its next start`);
  const running = node.view.snapshot.kernelVersion ?? null;
  if ((running !== null && running !== facts.kernel) || facts.enforcedBy.length === 0) return null;
  const untrusted: RefusedModule[] = [...declared]
    .filter((signer) => !isSignerTrusted(facts.keys, signer))
    .map((signer) => ({ module: 'its modules', signedBy: signer === UNSIGNED ? UNSIGNED : `"${signer}"` }));
  if (untrusted.length === 0) return null;
  const refusal = describeRefusal(newestDriver(ctx), { enforcedBy: facts.enforcedBy, untrusted, trustedKeys: trustedKeyNames(facts.keys) });
  return held(
    `not started: kernel ${facts.kernel}: ${refusal}; the signer as the template declares it (${MODULE_SIGNER_ANNOTATION}), the kernel as the agent on the node reads it (${key}); ` +
      'starts once the agent on the node reports the key trusted',
  );
}

const newestDriver = (ctx: StartContext): string => `the ${ctx.policy.keys.driver} driver of the newest template`;
