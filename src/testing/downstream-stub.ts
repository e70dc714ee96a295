/** The earlier module of `bullmq-idempotency/testing`; everything is in index.ts. */
export * from './index.js';
