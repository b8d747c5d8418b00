/**
 * What the share link specs share: a small notebook, a websocket upgrade that reports a refusal's
 * status and body, the cookies a response sets, and making a link as the owner.
 */
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
