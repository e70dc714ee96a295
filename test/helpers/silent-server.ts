import { type AddressInfo, createServer, type Socket } from 'node:net';

/**
 * A TCP listener on a free loopback port that accepts connections and never answers: a Redis
 * (or any server) that hangs. `close()` drops the connections it holds and stops listening.
 *
 * @example
 * const silent = await startSilentServer();
 * // REDIS_URL=redis://127.0.0.1:<silent.port> must fail within its check, not hang
 * await silent.close();
 */
export async function startSilentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
