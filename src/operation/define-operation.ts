import type { z } from 'zod';
import { enqueue, enqueueBulk } from './enqueue.js';
import { type Operation, type OperationDefinition, operationCore } from './operation.js';

/** Declares a side-effecting operation. Validates the declaration at once. */
export function defineOperation<S extends z.ZodType, R = unknown, const P extends readonly (keyof R & string)[] = []>(
  def: OperationDefinition<S, R> & { publicResult?: P },
): Operation<S, R, P[number]> {
  const op: Operation<S, R, P[number]> = {
    ...operationCore(def),
    enqueue: (queue, input, options) => enqueue(op, queue, input, options),
    enqueueBulk: (queue, items) => enqueueBulk(op, queue, items),
  };
  return op;
}
