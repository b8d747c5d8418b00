/**
 * `--allow-origin '*'` opens the gateway to other sites' scripts that carry the token, never to
 * the sign-in cookie a browser would attach to whatever another site makes it send.
 */
import WebSocket from 'ws';
import { startGateway, type ITestGateway } from './helpers';

const EVIL = 'https://evil.example';
const FRIEND = 'https://friend.example';

describe("--allow-origin '*' and the sign-in cookie", () => {
  let gw: ITestGateway;
  /** The `Cookie` header of a browser that opened the token link. */
  let cookie: string;
  let xsrf: string;

  beforeAll(async () => {
    gw = await startGateway({ allowOrigins: ['*', FRIEND] });
    const signIn = await fetch(`${gw.url}/lab?token=${gw.token}`, {
      redirect: 'manual'
    });
    const cookies = signIn.headers.getSetCookie().map(c => c.split(';')[0]);
    cookie = cookies.join('; ');
    xsrf = cookies.find(c => c.startsWith('_xsrf='))!.slice('_xsrf='.length);
  });

  afterAll(async () => {
    await gw.close();
  });

  it('lets any origin in with the token', async () => {
    const response = await gw.api('GET', '/api/kernels', undefined, {
      headers: { Origin: EVIL }
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe(EVIL);
  });

  it('refuses requests signed in by cookie from an origin not given by name', async () => {
    const asBrowser = (origin: string, method = 'GET') =>
      gw.api(method, '/api/sessions', method === 'GET' ? undefined : {}, {
        token: null,
        headers: { Origin: origin, Cookie: cookie, 'X-XSRFToken': xsrf }
      });
    for (const method of ['GET', 'POST']) {
      const refused = await asBrowser(EVIL, method);
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({
        reason: 'Forbidden',
        message: expect.stringContaining('signed in by cookie')
      });
    }
    expect((await asBrowser(gw.url)).status).toBe(200);
    expect((await asBrowser(FRIEND)).status).toBe(200);
  });

  /** The status of a websocket upgrade to `path` (101 when it opens). */
  function upgrade(
    path: string,
    origin: string,
    headers: Record<string, string>
  ): Promise<number> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`${gw.url.replace('http', 'ws')}${path}`, {
        origin,
        headers
      });
      socket.on('unexpected-response', (_request, response) => {
        resolve(response.statusCode!);
        socket.terminate();
      });
      socket.on('open', () => {
        resolve(101);
        socket.close();
      });
      socket.on('error', reject);
    });
  }

  it('refuses websockets signed in by cookie from other sites (cross-site websocket hijacking)', async () => {
    const events = '/api/events/subscribe';
    expect(await upgrade(events, EVIL, { Cookie: cookie })).toBe(403);
    expect(await upgrade(events, gw.url, { Cookie: cookie })).toBe(101);
    expect(await upgrade(events, FRIEND, { Cookie: cookie })).toBe(101);
    expect(await upgrade(`${events}?token=${gw.token}`, EVIL, {})).toBe(101);
    // A kernel's channels: the origin is refused before the kernel is even looked up.
    const channels = '/api/kernels/no-such-kernel/channels';
    expect(await upgrade(channels, EVIL, { Cookie: cookie })).toBe(403);
    expect(await upgrade(channels, gw.url, { Cookie: cookie })).toBe(404);
  });
});
