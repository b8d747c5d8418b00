/**
 * One check chain for requests and websocket upgrades (http/checks.ts): a socket is refused as a
 * request with the same credentials and origin is, with the same status and `{ reason, message }`,
 * and in the same order (the origin before the credentials). A real gateway, real sockets.
 */
import { startGateway, type ITestGateway } from './helpers';
import { upgrade } from './share-clients';

const EVIL = 'https://evil.example';

/** A socket of each route: the chain refuses each before its route looks at what it names. */
const SOCKETS = [
  '/api/events/subscribe',
  '/api/kernels/no-such-kernel/channels',
  '/api/collaboration/room/json:notebook:none',
  '/terminals/websocket/none'
];

describe('one check chain for requests and sockets', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({ limits: { authFailuresPerMinute: 5 } });
  });

  afterAll(async () => {
    await gw.close();
  });

  /** How an HTTP request and a socket upgrade with these credentials and headers are answered. */
  async function both(
    token: string | null,
    headers: Record<string, string> = {}
  ): Promise<{ request: unknown; sockets: unknown[] }> {
    const response = await gw.api('GET', '/api/kernels', undefined, {
      token,
      headers
    });
    const query = token === null ? '' : `?token=${encodeURIComponent(token)}`;
    const sockets = [];
    for (const pathname of SOCKETS) {
      const outcome = await upgrade(
        `${gw.url.replace('http', 'ws')}${pathname}${query}`,
        headers
      );
      if ('ws' in outcome) {
        outcome.ws.close();
        sockets.push({ pathname, status: 101 });
      } else {
        sockets.push({ pathname, ...outcome });
      }
    }
    return {
      request: { status: response.status, body: response.body },
      sockets
    };
  }

  /** What every socket of {@link both} gets when the chain refuses it with `status` and `body`. */
  function same(request: unknown): unknown[] {
    const { status, body } = request as { status: number; body: unknown };
    return SOCKETS.map(pathname => ({ pathname, status, body }));
  }

  it('refuses a socket without credentials as a request: 401', async () => {
    const { request, sockets } = await both(null);
    expect(request).toEqual({
      status: 401,
      body: { reason: 'Unauthorized', message: 'A valid token is required' }
    });
    expect(sockets).toEqual(same(request));
  });

  it('refuses a socket from another site for its origin before its credentials, as a request', async () => {
    for (const token of [null, 'wrong', gw.token]) {
      const { request, sockets } = await both(token, { Origin: EVIL });
      expect(request).toEqual({
        status: 403,
        body: { reason: 'Forbidden', message: `Origin not allowed: ${EVIL}` }
      });
      expect(sockets).toEqual(same(request));
    }
  });

  it('counts a wrong token on a socket as on a request, then refuses both alike: 429', async () => {
    const wrong = await both('wrong-1');
    expect(wrong.request).toMatchObject({ status: 401 });
    expect(wrong.sockets).toEqual(same(wrong.request));
    // Five guesses (one request, four sockets): the limit. Now even the right token is refused.
    const { request, sockets } = await both(gw.token);
    const refused = {
      status: 429,
      body: {
        reason: 'Too Many Requests',
        message: expect.stringMatching(
          /^Too many wrong tokens from this address: try again in \d+ s \(--max-auth-failures\)$/
        )
      }
    };
    expect(request).toEqual(refused);
    expect(sockets).toEqual(same(refused));
  });
});
