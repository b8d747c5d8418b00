/**
 * y-websocket 1.x's reference server, as its `bin/server.js` runs it (rooms in memory, no auth, no
 * persistence), on a free loopback port: what `npm run bench` compares Ferry's rooms with. Prints
 * `listening on PORT`.
 */
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { setupWSConnection } = require('y-websocket/bin/utils') as {
  setupWSConnection(
    socket: unknown,
    request: unknown,
    options?: { gc?: boolean }
  ): void;
};

const server = createServer((_request, response) => {
  response.writeHead(200, { 'Content-Type': 'text/plain' });
  response.end('okay');
});
const wss = new WebSocketServer({ server, perMessageDeflate: false });
wss.on('connection', (socket, request) =>
  setupWSConnection(socket, request, { gc: true })
);
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(
    `listening on ${typeof address === 'object' && address ? address.port : 0}\n`
  );
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
