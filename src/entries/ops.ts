/**
 * `bullmq-idempotency/ops`: the operations process (`bullmq-idempotency start`) in a process of
 * your own, its configuration and HTTP server, and the confirmation tools operators use.
 */
export { type Config as OperationsConfig, type ConnectionFlags, loadConfig } from '../config/env.js';
export {
  type AnswerConfirmationOptions,
  type AnswerResult,
  answerConfirmation,
  type ConfirmationsOptions,
  listConfirmations,
} from '../confirm/answer.js';
export {
  CONFIRMATION_HTTP_CODES,
  type ConfirmationHttpHandler,
  type ConfirmationHttpOptions,
  confirmationHttpHandler,
  MIN_CONFIRMATION_TOKEN_LENGTH,
} from '../confirm/http-handler.js';
export { OPERATOR_JWT_CODES, type OperatorJwtCode } from '../confirm/operator-jwt.js';
export {
  type ReplicationFacts,
  type ReplicationRisk,
  type ReplicationRiskReason,
  readReplicationFacts,
  replicationRisk,
} from '../ledger/replication-check.js';
export {
  DEFAULT_HTTP_HOST,
  HttpError,
  type HttpMethod,
  type HttpMountHandler,
  type HttpReply,
  type HttpRoute,
  OpsHttpServer,
  readBody,
} from '../ops/http-server.js';
export {
  createRelayWorker,
  DEFAULT_RELAY_EVERY_MS,
  DEFAULT_RELAY_QUEUE,
  RELAY_SCHEDULER_ID,
  relaySchedule,
  relayScheduled,
} from '../ops/intent-relay-worker.js';
export {
  type OperationsProcess,
  type OperationsProcessOptions,
  startOperationsProcess,
} from '../ops/operations-process.js';
export { KeptSchedule, type KeptScheduleSpec, type KeptScheduleState } from '../shared/kept-schedule.js';
export { ASYMMETRIC_JWS_ALGORITHMS, type OperatorJwks, type OperatorJwtOptions } from '../shared/operator-jwt.js';
export {
  newOperatorToken,
  type Operator,
  operatorEntry,
  parseOperators,
} from '../shared/operators.js';
