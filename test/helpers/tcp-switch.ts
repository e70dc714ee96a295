import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP forwarder on a loopback port whose target can be switched, as a virtual IP or a proxy
 * in front of a Postgres primary is moved by a failover: clients keep one address, `cut()`
 * drops every connection, and while no target is set new connections are refused (closed).
 */
export class TcpSwitch {
  private readonly open = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private target: number | undefined,
  ) {}

  static async start(target: number): Promise<TcpSwitch> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const sw = new TcpSwitch(server, (server.address() as { port: number }).port, target);
    server.on('connection', (client) => sw.accept(client));
    return sw;
  }

  private accept(client: Socket): void {
    if (this.target === undefined) {
      client.destroy();
      return;
    }
    const upstream = connect(this.target, '127.0.0.1');
    for (const s of [client, upstream]) {
      this.open.add(s);
      s.setNoDelay(true);
      s.on('error', () => {});
      s.on('close', () => {
        this.open.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Drops every connection; new ones go to `target` (refused while it is undefined). */
  cut(target: number | undefined): void {
    this.target = target;
    for (const s of this.open) s.destroy();
    this.open.clear();
  }

  async close(): Promise<void> {
    this.cut(undefined);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
