import type pg from 'pg';
import { errorLabel } from '../errors/clean-name.js';
import type { Logger } from '../shared/logger.js';
import { intentChannel } from './intent-store.js';

/** How long the listener waits before listening again on a new connection after losing one. */
const RECONNECT_MS = 1_000;

/**
 * Listens on the schema's intents channel (see `intentChannel`) and calls `onNotify` for each
 * notification: a transaction that recorded an intent has committed. It holds one connection of
 * `pool` for as long as it listens (a `LISTEN` needs a session: not through a pooler in
 * transaction mode). A lost connection is replaced after a second, and `onNotify` is called once
 * then, for the notifications the gap may have missed; polling remains the fallback.
 */
export class IntentListener {
  private client: pg.PoolClient | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly onNotify: () => void,
    private readonly logger?: Logger,
  ) {}

  /** Connects and listens; resolves once `LISTEN` is in effect. */
  async start(): Promise<void> {
    const client = await this.pool.connect();
    client.on('notification', () => this.onNotify());
    client.on('error', (err) => {
      if (this.client !== client) return;
      this.client = undefined;
      client.release(err);
      this.logger?.warn({ err: errorLabel(err) }, 'intent listener lost its connection; listening again');
      this.later();
    });
    try {
      await client.query(`listen ${intentChannel(this.schema)}`);
    } catch (err) {
      client.release(err instanceof Error ? err : true);
      throw err;
    }
    this.client = client;
  }

  private later(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.start().then(
        () => this.onNotify(),
        (err: unknown) => {
          this.logger?.warn({ err: errorLabel(err) }, 'intent listener could not listen; trying again');
          this.later();
        },
      );
    }, RECONNECT_MS);
    this.timer.unref();
  }

  /** Stops listening and gives the connection back. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    try {
      await client.query('unlisten *');
      client.release();
    } catch (err) {
      client.release(err instanceof Error ? err : true);
    }
  }
}
