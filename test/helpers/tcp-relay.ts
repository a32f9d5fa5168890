import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP relay on loopback in front of a server, which a test can make go silent: while held,
 * no byte passes in either direction and nothing is closed (a half-dead connection, a stalled
 * network path), so a client learns of it only from its own timeouts.
 */
export interface TcpRelay {
  port: number;
  hold(on: boolean): void;
  close(): Promise<void>;
}

export async function startTcpRelay(targetPort: number): Promise<TcpRelay> {
  let held = false;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (held) socket.pause();
  };
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('relay has no port');
  return {
    port: address.port,
    hold(on) {
      held = on;
      for (const socket of sockets)
        if (on) socket.pause();
        else socket.resume();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
