import { z } from 'zod';
import { defineOperation } from '../../src/operation/define-operation.js';

/** The operation bench/wrapper.ts enqueues and its worker processes (in process or in bench/lib/worker-child.ts). */
export const benchOperation = defineOperation({
  name: 'bench.wrapper',
  namespace: 'bench/wrapper',
  version: 'v1',
  input: z.object({ id: z.string(), n: z.number().int() }),
  effect: (input) => input,
  resourceKey: (input) => input.id,
  retention: '1h',
  lease: '10s', // shorter than the worker's lockDuration (30 s, BullMQ's default)
  downstream: 'idempotent',
});
