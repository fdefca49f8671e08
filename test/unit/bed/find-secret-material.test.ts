import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSecretMaterial, knownSecretFragments } from '../../bed/find-secret-material.ts';

let dir: string;
let keyPem: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'secrets-'));
  execFileSync('openssl', ['genrsa', '-out', join(dir, 'a.key'), '2048'], { stdio: 'ignore' });
  execFileSync('openssl', ['req', '-x509', '-new', '-key', join(dir, 'a.key'), '-subj', '/CN=t', '-days', '1', '-out', join(dir, 'a.crt')], { stdio: 'ignore' });
  await writeFile(join(dir, 'notes.txt'), 'not a PEM file\n');
  keyPem = execFileSync('cat', [join(dir, 'a.key')], { encoding: 'utf8' });
  await writeFile(join(dir, 'kubeconfig'), `users:\n- name: u\n  user:\n    token: ${'t0k3n'.repeat(20)}\n    client-key-data: ${Buffer.from(keyPem).toString('base64')}\n`);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('finding secret material in logs', () => {
  it('finds nothing in ordinary log lines (keys, node names, certificate subjects, errors)', () => {
    const log = [
      '{"level":"info","msg":"became leader","identity":"coordinator-7d9f"}',
      '{"level":"warn","msg":"cannot patch node","why":"nodes \\"gpu-a-1\\" is forbidden: User \\"system:serviceaccount:x:driver\\" cannot patch"}',
      'certificate-authority: /tmp/control-plane-x/pki/ca.crt',
      '{"msg":"token request failed","status":401}',
    ].join('\n');
    expect(findSecretMaterial(log, 'log')).toEqual([]);
  });

  it.each([
    ['a PEM block', '{"msg":"loaded","key":"-----BEGIN RSA PRIVATE KEY-----\\nMIIE"}'],
    ['a PEM block', 'x -----BEGIN CERTIFICATE----- y'],
    ['a bearer token', '{"headers":{"authorization":"Bearer abcdefghijklmnop"}}'],
    ['a JWT', 'token=eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlc2ln'],
    ['base64-encoded PEM', `client-key-data: ${Buffer.from('-----BEGIN EC PRIVATE KEY-----').toString('base64')}`],
    ['base64-encoded PEM', Buffer.from('x-----BEGIN CERTIFICATE-----').toString('base64')],
    ['base64-encoded PEM', Buffer.from('xy-----BEGIN CERTIFICATE-----').toString('base64')],
  ])('finds %s, naming the line and quoting only its start', (name, line) => {
    const found = findSecretMaterial(`first line\n${line}`, 'agent.log');
    expect(found.some((f) => f.startsWith(`agent.log:2: ${name} (`))).toBe(true);
    expect(found.join('\n').length).toBeLessThan(200);
  });

  it('finds the test bed’s own key and certificate, and kubeconfig values, from fragments of them', async () => {
    const known = await knownSecretFragments(dir, join(dir, 'kubeconfig'));
    const keyBodyLine = keyPem.split('\n')[5] ?? '';
    expect(findSecretMaterial(`{"msg":"x","detail":"${keyBodyLine}"}`, 'c.log', known)).toEqual([expect.stringMatching(/^c\.log:1: the test bed's own secret/)]);
    expect(findSecretMaterial(`token ${'t0k3n'.repeat(20)}`, 'c.log', known)).toEqual([expect.stringMatching(/own secret/)]);
    expect(findSecretMaterial('nothing here', 'c.log', known)).toEqual([]);
  });
});
