import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findSecretMaterial, knownSecretFragments } from '../../bed/find-secret-material.ts';
import { startProgram } from '../../bed/program-process.ts';

// A full e2e run is the demo (`npm run demo`): its own `full` control plane, the real
// coordinator, and the real init container and agent of every driver pod run by the process
// kubelet, through a first install and an upgrade of 8 nodes. With --keep it stays up once both
// phases are done, so its logs and the control plane's PKI can be read before it is stopped.
// Every log (coordinator, each init container and agent, the demo's own output) is scanned for
// key, certificate and token material, the control plane's own keys and certificates included.

/** Both phases (600 s each at most in the demo) and a control plane start on a loaded machine. */
const DEMO_TIMEOUT_MS = 1_500_000;

describe('a full e2e run (the demo)', () => {
  it('writes no token, certificate or key material to any log', async () => {
    const demo = startProgram('demo/main.ts', { env: {}, inheritEnv: true, args: ['--keep'] });
    try {
      const kept = await demo.logLine((l) => l.msg.includes('cluster kept running'), DEMO_TIMEOUT_MS);
      const kubeconfigPath = /KUBECONFIG=(\S+);/.exec(kept.msg)?.[1] ?? '';
      const logsLine = demo.lines.find((l) => l.msg.includes('logs under '));
      const work = /logs under (\S+)$/.exec(logsLine?.msg ?? '')?.[1] ?? '';
      expect(kubeconfigPath).not.toBe('');
      expect(work).not.toBe('');

      const known = await knownSecretFragments(join(dirname(kubeconfigPath), 'pki'), kubeconfigPath);
      expect(known.length).toBeGreaterThan(10);
      const pods = (await readdir(join(work, 'pods'))).map((f) => join(work, 'pods', f));
      const logs = [join(work, 'coordinator.log'), ...pods];
      // Every program wrote its log: the coordinator, and an init container and an agent per pod.
      expect(pods.filter((p) => p.endsWith('.safe-load-gate.log')).length).toBeGreaterThanOrEqual(8);
      expect(pods.filter((p) => p.endsWith('.agent.log')).length).toBeGreaterThanOrEqual(8);
      const findings: string[] = [];
      let lines = 0;
      for (const log of logs) {
        const text = await readFile(log, 'utf8');
        lines += text.split('\n').length;
        findings.push(...findSecretMaterial(text, log, known));
      }
      findings.push(...findSecretMaterial(demo.output(), 'demo output', known));
      expect(lines).toBeGreaterThan(100);
      expect(findings).toEqual([]);
    } finally {
      demo.signal('SIGINT');
      await demo.exited;
    }
  }, DEMO_TIMEOUT_MS + 120_000);
});
