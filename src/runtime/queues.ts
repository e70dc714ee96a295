import type { ConnectionOptions, Queue } from 'bullmq';
import { errorLabel } from '../errors/clean-name.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import type { Logger } from '../shared/logger.js';
import { openQueue } from '../shared/queue-backend.js';

/**
 * The BullMQ queues a runtime opens: one per name, on its connection and prefix, opened on first
 * use and closed together.
 */
export class RuntimeQueues {
  private readonly open = new Map<string, Queue>();

  constructor(
    private readonly connection: ConnectionOptions,
    private readonly prefix: string,
    private readonly logger: Logger,
  ) {}

  /** The queue named `name`, opened now if it is not yet. */
  get(name: string): Queue {
    const found = this.open.get(name);
    if (found) return found;
    checkQueueName(name);
    const queue = openQueue(name, { connection: this.connection, prefix: this.prefix });
    queue.on('error', (err) => this.logger.error({ queue: name, err: errorLabel(err) }, 'queue error'));
    this.open.set(name, queue);
    return queue;
  }

  async close(): Promise<void> {
    const queues = [...this.open.values()];
    this.open.clear();
    await Promise.all(queues.map((q) => q.close()));
  }
}

/** BullMQ joins prefix, name and suffix with `:`, so a name holding one would collide with other keys. */
export function checkQueueName(name: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.includes(':')) {
    throw new IdempotencyConfigError(`queue name ${JSON.stringify(name)} must be a non-empty string without ':'`, {
      option: 'queue',
    });
  }
  return name;
}
