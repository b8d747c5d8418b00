import { PageConfig } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gatewayProblem, gatewayServerSettings } from '../src/gateway';
import { AcceleratorManager } from '../src/manager';
import { cluster, next } from '@ferry/testing';

/**
 * A Ferry stand-in on a real socket, at `/ferry/` on its origin: `/ferry/api/accelerators` and its
 * stream answer with the token `secret`, everything else is a JSON 404, as a notebook server that
 * is not Ferry answers.
 */
class Gateway {
  requests: http.IncomingMessage[] = [];
  open = new Set<http.ServerResponse>();
  server = http.createServer((request, response) => {
    this.requests.push(request);
    const url = new URL(request.url!, 'http://x');
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'Content-Type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (!url.pathname.startsWith('/ferry/api/accelerators')) {
      json(404, { reason: 'Not Found', message: 'no such path' });
    } else if (request.headers.authorization !== 'token secret') {
      json(403, { reason: 'Forbidden', message: 'bad token' });
    } else if (url.pathname === '/ferry/api/accelerators') {
      json(200, cluster());
    } else {
      response.writeHead(200, { 'Content-Type': 'text/event-stream' });
      response.write(`event: snapshot\ndata: ${JSON.stringify(cluster())}\n\n`);
      this.open.add(response);
    }
  });
  url = '';

  async start(): Promise<void> {
    await new Promise<void>(resolve =>
      this.server.listen(0, '127.0.0.1', resolve)
    );
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}/ferry/`;
  }

  async stop(): Promise<void> {
    for (const response of this.open) {
      response.socket?.destroy();
    }
    this.server.closeAllConnections();
    await new Promise(resolve => this.server.close(resolve));
  }
}

/** The page's own server: jupyter_server, which has no /api/accelerators. */
const pageSettings = ServerConnection.makeSettings({
  baseUrl: 'http://127.0.0.1:9/lab-server/',
  token: 'notebook-server-token'
});

describe('a gateway URL other than the page server', () => {
  let gateway: Gateway;
  let manager: AcceleratorManager | undefined;

  beforeEach(async () => {
    gateway = new Gateway();
    await gateway.start();
  });

  afterEach(async () => {
    manager?.dispose();
    manager = undefined;
    PageConfig.setOption('ferryGatewayUrl', '');
    PageConfig.setOption('ferryGatewayToken', '');
    await gateway.stop();
  });

  it('is where the client and the stream go, with its token in a header and no cookie or XSRF token', async () => {
    manager = new AcceleratorManager({
      serverSettings: pageSettings,
      gateway: { gatewayUrl: gateway.url, gatewayToken: 'secret' }
    });
    const model = await manager.ready;
    expect(model.workers[0].devices).toHaveLength(6);
    expect(manager.client.serverSettings.baseUrl).toBe(gateway.url);
    // In a page served by jupyter_server, makeRequest adds that server's XSRF cookie as a header.
    const response = await ServerConnection.makeRequest(
      `${gateway.url}api/accelerators`,
      { headers: { 'X-XSRFToken': 'notebook-server-xsrf' } },
      manager.client.serverSettings
    );
    expect(response.status).toBe(200);
    const paths = gateway.requests.map(
      r => new URL(r.url!, 'http://x').pathname
    );
    expect(paths).toEqual(
      expect.arrayContaining([
        '/ferry/api/accelerators/stream',
        '/ferry/api/accelerators'
      ])
    );
    for (const request of gateway.requests) {
      expect(request.headers.authorization).toBe('token secret');
      expect(request.headers['x-xsrftoken']).toBeUndefined();
      expect(request.headers.cookie).toBeUndefined();
      // The token never travels in the URL, where proxies and logs keep it.
      expect(request.url).not.toContain('secret');
    }
  });

  it('comes from the page config when the settings leave it empty', async () => {
    PageConfig.setOption('ferryGatewayUrl', gateway.url);
    PageConfig.setOption('ferryGatewayToken', 'secret');
    manager = new AcceleratorManager({
      serverSettings: pageSettings,
      gateway: { gatewayUrl: '', gatewayToken: '' }
    });
    await manager.ready;
    expect(gateway.requests[0].headers.authorization).toBe('token secret');
  });

  it('falls back on the page server, which keeps its own token', () => {
    expect(gatewayServerSettings({}, pageSettings)).toBe(pageSettings);
  });

  it('can be set while running: the manager leaves the page server for the gateway', async () => {
    manager = new AcceleratorManager({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: gateway.url.replace('/ferry/', '/lab/')
      }),
      backoff: { initialMs: 10, maxMs: 20 }
    });
    // The page server is not Ferry: 404, and the user is told where to set the URL.
    await next(manager.connectionChanged, state => state === 'waiting');
    const problem = gatewayProblem(
      manager.connectionError,
      manager.client.serverSettings.baseUrl
    );
    expect(problem).toBe(
      `${gateway.url.replace('/ferry/', '/lab/')}api/accelerators was not found (404): this server is not Ferry. If this JupyterLab uses Ferry through \`jupyter server --gateway-url\`, set "Gateway URL" and "Gateway token" in Settings → Ferry Accelerators.`
    );
    const changed = next(manager.changed);
    manager.gateway = { gatewayUrl: gateway.url, gatewayToken: 'secret' };
    await changed;
    expect(manager.connectionState).toBe('open');
    expect(manager.connectionError).toBeNull();
  });

  it('says what to do when the gateway cannot be reached, refuses the token, or is no URL', async () => {
    const closed = new Gateway();
    await closed.start();
    await closed.stop();
    manager = new AcceleratorManager({
      serverSettings: pageSettings,
      gateway: { gatewayUrl: closed.url, gatewayToken: 'secret' },
      backoff: { initialMs: 10, maxMs: 20 }
    });
    await next(manager.connectionChanged, state => state === 'waiting');
    expect(manager.connectionError).toBeInstanceOf(
      ServerConnection.NetworkError
    );
    expect(
      gatewayProblem(
        manager.connectionError,
        manager.client.serverSettings.baseUrl
      )
    ).toMatch(
      new RegExp(
        `^${closed.url}api/accelerators cannot be reached \\(.+\\)\\. If this JupyterLab uses Ferry through .+, and start Ferry with --allow-origin `
      )
    );

    manager.gateway = { gatewayUrl: gateway.url, gatewayToken: 'wrong' };
    await next(manager.connectionChanged, state => state === 'waiting');
    expect(
      gatewayProblem(
        manager.connectionError,
        manager.client.serverSettings.baseUrl
      )
    ).toBe(
      `${gateway.url}api/accelerators refused the request (403: bad token). Check "Gateway token" in Settings → Ferry Accelerators, and that Ferry allows this page's origin (--allow-origin).`
    );

    manager.gateway = { gatewayUrl: 'gateway:8888' };
    expect(manager.connectionState).toBe('idle');
    expect(
      gatewayProblem(
        manager.connectionError,
        manager.client.serverSettings.baseUrl
      )
    ).toBe(
      'The gateway URL "gateway:8888" must start with http:// or https://. Fix "Gateway URL" in Settings → Ferry Accelerators.'
    );
  });
});
