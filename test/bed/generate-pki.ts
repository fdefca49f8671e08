import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Paths of the PKI one control plane uses, all under its work dir. */
export interface Pki {
  readonly caCert: string;
  readonly caKey: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly adminCert: string;
  readonly adminKey: string;
  /** RSA key pair that signs and verifies service-account tokens. */
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;
}

/**
 * A fresh CA, a serving certificate for 127.0.0.1/localhost (and the in-cluster service names),
 * an admin client certificate in group system:masters and a service-account key pair, made
 * with openssl. Nothing is reused between control planes.
 */
export async function generatePki(dir: string): Promise<Pki> {
  const p = (name: string): string => join(dir, name);
  const openssl = async (...args: string[]): Promise<void> => {
    await run('openssl', args);
  };
  await openssl('genrsa', '-out', p('ca.key'), '2048');
  await openssl('req', '-x509', '-new', '-nodes', '-key', p('ca.key'), '-subj', '/CN=driver-rollout-test-ca', '-days', '30', '-out', p('ca.crt'));
  await writeFile(
    p('server.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' +
      'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n',
  );
  await writeFile(p('client.ext'), 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n');
  const ca = { caCert: p('ca.crt'), caKey: p('ca.key') };
  await issueCertificate(ca, dir, 'server', '/CN=kube-apiserver', p('server.ext'));
  await issueCertificate(ca, dir, 'admin', '/O=system:masters/CN=driver-rollout-test-admin', p('client.ext'));
  await openssl('genrsa', '-out', p('sa.key'), '2048');
  await openssl('rsa', '-in', p('sa.key'), '-pubout', '-out', p('sa.pub'));
  return {
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    adminCert: p('admin.crt'),
    adminKey: p('admin.key'),
    serviceAccountKey: p('sa.key'),
    serviceAccountPub: p('sa.pub'),
  };
}

/**
 * A key and a certificate for `subject` signed by the control plane's CA, written to
 * `<dir>/<name>.key` and `<dir>/<name>.crt`; `extFile` holds its extensions. Without one: a
 * client certificate (e.g. a real node's, `/O=system:nodes/CN=system:node:<name>`).
 */
export async function issueCertificate(
  ca: Pick<Pki, 'caCert' | 'caKey'>,
  dir: string,
  name: string,
  subject: string,
  extFile?: string,
): Promise<{ cert: string; key: string }> {
  const p = (file: string): string => join(dir, file);
  let ext = extFile;
  if (ext === undefined) {
    ext = p(`${name}.ext`);
    await writeFile(ext, 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n');
  }
  await run('openssl', ['genrsa', '-out', p(`${name}.key`), '2048']);
  await run('openssl', ['req', '-new', '-key', p(`${name}.key`), '-subj', subject, '-out', p(`${name}.csr`)]);
  await run('openssl', ['x509', '-req', '-in', p(`${name}.csr`), '-CA', ca.caCert, '-CAkey', ca.caKey, '-CAcreateserial',
    '-days', '30', '-extfile', ext, '-out', p(`${name}.crt`)]);
  return { cert: p(`${name}.crt`), key: p(`${name}.key`) };
}
