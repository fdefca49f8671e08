/**
 * The agent's module-signature verdict as the node annotation carries it
 * (shared/module-signature-verdict.ts): written by the agent, read by the coordinator's start
 * check, the same words in both programs' messages.
 */
import { describe, expect, it } from 'vitest';
import { driverFingerprint } from '../../../shared/driver-identity.ts';
import { describeRefusal, isRefused, parseSignatureVerdict, renderSignatureVerdict, type SignatureVerdict } from '../../../shared/module-signature-verdict.ts';
import { NodeAnnotationProblem, readNodeAnnotation } from '../../../shared/node-annotations.ts';
import { driverKeys } from '../../../shared/keys.ts';

const FINGERPRINT = driverFingerprint({ version: '570.86.15', modules: ['nvidia', 'nvidia-uvm'], loadPlan: 'nvidia', loadOptional: [], parameters: { nvidia: { NVreg_EnableGpuFirmware: '1' } } });
const REFUSED: SignatureVerdict = {
  fingerprint: FINGERPRINT,
  kernel: '6.1.0-50-amd64',
  enforcedBy: ['module.sig_enforce', 'Secure Boot'],
  untrusted: [{ module: 'nvidia', signedBy: 'unsigned' }, { module: 'nvidia_uvm', signedBy: '"agent key" (key 1A:2B)' }],
  trustedKeys: ['Debian Secure Boot CA', 'Debian Secure Boot Signer 2022 - linux'],
};
const keys = driverKeys('gpu');

describe('renderSignatureVerdict / parseSignatureVerdict', () => {
  it('round-trips, the driver part as the canonical fingerprint, readable in kubectl', () => {
    const text = renderSignatureVerdict(REFUSED);
    expect(text.startsWith(`{"driver":${FINGERPRINT},"kernel":"6.1.0-50-amd64",`)).toBe(true);
    expect(parseSignatureVerdict(text)).toEqual(REFUSED);
  });

  it('reads the driver part canonically: another key order or module spelling is the same driver', () => {
    const text = renderSignatureVerdict(REFUSED).replace(FINGERPRINT, JSON.stringify({ parameters: { nvidia: { NVreg_EnableGpuFirmware: '1' } }, loadOptional: [], loadPlan: 'nvidia', modules: ['nvidia_uvm', 'nvidia'], version: '570.86.15' }));
    expect(parseSignatureVerdict(text)?.fingerprint).toBe(FINGERPRINT);
  });

  it.each([
    ['not JSON', 'trusted'],
    ['no driver', JSON.stringify({ kernel: 'k', enforcedBy: [], untrusted: [], trustedKeys: [] })],
    ['a driver without a version', JSON.stringify({ driver: { modules: [] }, kernel: 'k', enforcedBy: [], untrusted: [], trustedKeys: [] })],
    ['no kernel', renderSignatureVerdict(REFUSED).replace('"kernel":"6.1.0-50-amd64",', '')],
    ['untrusted not a list', renderSignatureVerdict(REFUSED).replace(/"untrusted":\[.*?\],"trustedKeys"/, '"untrusted":"nvidia","trustedKeys"')],
    ['an untrusted entry without its signer', renderSignatureVerdict({ ...REFUSED, untrusted: [{ module: 'nvidia', signedBy: 'unsigned' }] }).replace(',"signedBy":"unsigned"', '')],
  ])('%s is no verdict', (_name, text) => {
    expect(parseSignatureVerdict(text)).toBeNull();
  });

  it('is read through the node annotations\' schema: a value that does not parse is a problem naming the node and the key', () => {
    const node = (value: string) => ({ name: 'gpu-1', annotations: { [keys.moduleSignatures]: value } });
    expect(keys.moduleSignatures).toBe('driver-rollout.io/gpu-driver.module-signatures');
    expect(readNodeAnnotation(node(renderSignatureVerdict(REFUSED)), keys, 'moduleSignatures')).toEqual(REFUSED);
    const problem = readNodeAnnotation(node('{}'), keys, 'moduleSignatures');
    expect(problem).toBeInstanceOf(NodeAnnotationProblem);
    expect((problem as NodeAnnotationProblem).message).toBe("node/gpu-1: annotation driver-rollout.io/gpu-driver.module-signatures is not the agent's module-signature verdict: \"{}\"");
  });
});

describe('isRefused / describeRefusal', () => {
  it('a verdict naming modules refuses the driver; one naming none, enforced or not, does not', () => {
    expect(isRefused(REFUSED)).toBe(true);
    expect(isRefused({ ...REFUSED, untrusted: [] })).toBe(false);
    expect(isRefused({ ...REFUSED, enforcedBy: [], untrusted: [] })).toBe(false);
  });

  it('names what enforces, each module with its signer, the keys the kernel trusts and how to enroll', () => {
    expect(describeRefusal('gpu', REFUSED)).toBe(
      'the kernel enforces module signatures (module.sig_enforce, Secure Boot) and would refuse gpu: nvidia unsigned; nvidia_uvm signed by "agent key" (key 1A:2B), a key not in its trusted keyrings; ' +
        'the keys it trusts: Debian Secure Boot CA, Debian Secure Boot Signer 2022 - linux; ' +
        'sign the modules with an enrolled key, or enroll the signing certificate (mokutil --import <certificate.der>, then confirm it in MokManager at the next boot)',
    );
    expect(describeRefusal('gpu', { ...REFUSED, trustedKeys: [] })).toContain('the keys it trusts: none;');
  });
});
