/**
 * The real `ferry gateway` as a child process, and the few client moves the soak and the memory
 * benchmark make against it (REST calls, legacy-framed websockets that read or never read).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { createHeader } from '@ferry/kernel-gateway';
import { FERRY_BIN } from './servers';

/** A cell that prints 100-character lines as fast as Python can, forever. */
export const FLOOD = "while True:\n    print('y' * 100)";

/** The resident set of a process, MiB. */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

export async function startGateway(
  root: string,
  token: string
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [
      FERRY_BIN,
      'gateway',
      '--port',
      '0',
      '--root-dir',
      root,
      '--log-level',
      'warn',
      // A state store of its own (in the root, removed with it): a state directory serves one gateway.
      '--state-dir',
      path.join(root, '.ferry-state'),
      // Kernels as this user: as root, Ferry would run them as nobody, to whom `root` is closed.
      '--kernel-user',
      userInfo().username
    ],
    {
      env: { ...process.env, FERRY_TOKEN: token },
      stdio: ['ignore', 'pipe', 'inherit']
    }
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', code =>
      reject(new Error(`gateway exited with ${code}`))
    );
    createInterface({ input: child.stdout! }).on('line', line => {
      const match = /is ready at (http:\/\/\S+?)\/?$/.exec(line);
      if (match) {
        resolve(match[1]);
      }
    });
  });
  return { child, url };
}

/** One REST call with the token; the body parsed as JSON. */
export async function api(
  url: string,
  token: string,
  method: string,
  route: string,
  body?: unknown
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: {
      Authorization: `token ${token}`,
      'Content-Type': 'application/json'
    },
    body: body === undefined ? undefined : JSON.stringify(body)
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

/** Open a legacy-framed websocket to a kernel; `read: false` makes a client that never reads. */
export async function connect(
  url: string,
  token: string,
  kernelId: string,
  read: boolean,
  onBytes: (n: number) => void
): Promise<WebSocket> {
  const ws = new WebSocket(
    `${url.replace(/^http/, 'ws')}/api/kernels/${kernelId}/channels?token=${token}`
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.on('error', () => undefined);
  if (read) {
    ws.on('message', (data: Buffer) => onBytes(data.length));
  } else {
    // The TCP socket under it stops reading: the gateway's writes pile up on its side.
    (ws as unknown as { _socket: { pause(): void } })._socket.pause();
  }
  return ws;
}

/** Send an execute_request on a legacy-framed socket. */
export function execute(ws: WebSocket, code: string): void {
  const session = randomUUID();
  ws.send(
    JSON.stringify({
      channel: 'shell',
      header: createHeader('execute_request', session),
      parent_header: {},
      metadata: {},
      content: { code, silent: false, store_history: false }
    })
  );
}
