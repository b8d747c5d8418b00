import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

/** The contents of a kernel connection file. */
export interface IConnectionInfo {
  transport: 'tcp';
  ip: string;
  shell_port: number;
  iopub_port: number;
  stdin_port: number;
  control_port: number;
  hb_port: number;
  key: string;
  signature_scheme: 'hmac-sha256';
  kernel_name: string;
}

/**
 * Ask the OS for `count` distinct free TCP ports on `ip`.
 *
 * #### Notes
 * The ports are released before the kernel binds them, so another process can take one meanwhile;
 * the launcher retries with fresh ports when that happens.
 */
export async function findFreePorts(
  count: number,
  ip: string
): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, ip, () => resolve());
      });
      ports.push((server.address() as net.AddressInfo).port);
    }
    return ports;
  } finally {
    await Promise.all(
      servers.map(s => new Promise<void>(resolve => s.close(() => resolve())))
    );
  }
}

/** Fresh connection info: new ports and a new 256-bit key. */
export async function createConnectionInfo(
  kernelName: string,
  ip = '127.0.0.1'
): Promise<IConnectionInfo> {
  const [shell, iopub, stdin, control, hb] = await findFreePorts(5, ip);
  return {
    transport: 'tcp',
    ip,
    shell_port: shell,
    iopub_port: iopub,
    stdin_port: stdin,
    control_port: control,
    hb_port: hb,
    key: randomBytes(32).toString('hex'),
    signature_scheme: 'hmac-sha256',
    kernel_name: kernelName
  };
}

/**
 * Write a connection file readable by its owner alone: this process, or `owner` (the user a kernel
 * runs as, which must then be able to read it).
 */
export async function writeConnectionFile(
  dir: string,
  kernelId: string,
  info: IConnectionInfo,
  owner?: { uid: number; gid: number }
): Promise<string> {
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, `kernel-${kernelId}.json`);
  await fs.writeFile(file, JSON.stringify(info, null, 1), { mode: 0o600 });
  if (owner) {
    await fs.chown(file, owner.uid, owner.gid);
  }
  return file;
}

/** The ZeroMQ URL of one of the kernel's ports. */
export function zmqUrl(info: IConnectionInfo, port: number): string {
  return `${info.transport}://${info.ip}:${port}`;
}
