/**
 * What the share link specs share: a small notebook, a websocket upgrade that reports a refusal's
 * status and body, the cookies a response sets, making a link as the owner, and a raw presence
 * (awareness) client that records every state the server sends it.
 */
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import WebSocket from 'ws';
import type { IApiResponse, ITestGateway } from './helpers';

/** A notebook of one code cell, as a contents PUT body. */
export const NOTEBOOK = {
  type: 'notebook',
  content: {
    cells: [
      {
        cell_type: 'code',
        id: 'c1',
        source: 'print(1)',
        metadata: {},
        outputs: [],
        execution_count: null
      }
    ],
    metadata: {},
    nbformat: 4,
    nbformat_minor: 5
  }
};

/** A link as its creation reply gives it. */
export interface ICreatedLink {
  id: string;
  token: string;
  url: string;
  path: string;
  scope: string;
}

/** Make a link as the owner (expects 201). */
export async function makeLink(
  gw: ITestGateway,
  body: Record<string, unknown>
): Promise<ICreatedLink> {
  const response = await gw.api('POST', '/api/shares', body);
  expect(response.status).toBe(201);
  return response.body as ICreatedLink;
}

/** A websocket upgrade's outcome: the socket, or the refusal's status and body. */
export async function upgrade(
  url: string,
  headers: Record<string, string> = {}
): Promise<
  | { ws: WebSocket }
  | { status: number; body: { reason: string; message: string } }
> {
  const ws = new WebSocket(url, { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws }));
    ws.once('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', chunk => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) })
      );
    });
    ws.once('error', reject);
  });
}

/** The cookies a response sets, as a `Cookie` header's value. */
export function cookiesOf(response: IApiResponse): string {
  return response.headers
    .getSetCookie()
    .map(cookie => cookie.split(';')[0])
    .join('; ');
}

/**
 * A client of a room's awareness alone, speaking y-protocols' awareness messages by hand (type 1: a
 * list of client id, clock, state JSON), so that it sees every state the server relays to it.
 */
export class PresenceClient {
  private constructor(private _ws: WebSocket) {
    _ws.binaryType = 'nodebuffer';
    _ws.on('message', (data: Buffer) => this._receive(new Uint8Array(data)));
  }

  /** Connect to a room's websocket URL (its credential in it); resolves once open. */
  static async connect(url: string): Promise<PresenceClient> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new PresenceClient(ws);
  }

  /** This client's awareness id. */
  readonly clientID = Math.floor(Math.random() * 2 ** 31);
  /** The client ids of the states received, in order. */
  readonly seen: number[] = [];
  /** The states received, as JSON text. */
  readonly texts: string[] = [];

  /** Send this client's state and resolve once the server has sent it back. */
  async announce(state: Record<string, unknown>): Promise<void> {
    this._clock++;
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 1);
    const update = encoding.createEncoder();
    encoding.writeVarUint(update, 1);
    encoding.writeVarUint(update, this.clientID);
    encoding.writeVarUint(update, this._clock);
    encoding.writeVarString(update, JSON.stringify(state));
    encoding.writeVarUint8Array(encoder, encoding.toUint8Array(update));
    const echoed = new Promise<void>(resolve => (this._echo = resolve));
    this._ws.send(encoding.toUint8Array(encoder));
    await echoed;
  }

  close(): void {
    this._ws.close();
  }

  private _receive(message: Uint8Array): void {
    const decoder = decoding.createDecoder(message);
    if (decoding.readVarUint(decoder) !== 1) {
      return;
    }
    const update = decoding.createDecoder(decoding.readVarUint8Array(decoder));
    const count = decoding.readVarUint(update);
    for (let i = 0; i < count; i++) {
      const clientID = decoding.readVarUint(update);
      decoding.readVarUint(update);
      const text = decoding.readVarString(update);
      if (!this.seen.includes(clientID)) {
        this.seen.push(clientID);
      }
      this.texts.push(text);
      if (clientID === this.clientID) {
        this._echo?.();
      }
    }
  }

  private _clock = 0;
  private _echo: (() => void) | undefined;
}
