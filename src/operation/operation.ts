import type { Queue } from 'bullmq';
import type { z } from 'zod';
import { IdempotencyConfigError, InvalidInputError, MissingIdempotencyKeyError } from '../errors/errors.js';
import { zodIssues } from '../errors/zod-issues.js';
import { keyedFingerprint } from '../fingerprint/keyed-fingerprint.js';
import { type IdempotencyKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import type { Downstream } from '../ledger/types.js';
import type { Keyring } from '../sealing/keyring.js';
import { type Duration, toMs } from './duration.js';
import type { EnqueueOptions, EnqueueResult } from './enqueue-types.js';
import { assertRetentionCovers, type RetryWindowOptions, retryWindowMs } from './retry-window.js';

/** What a reconcile hook found out about an earlier attempt whose outcome is ambiguous. */
export type ReconcileOutcome = { committed: true; result: unknown } | { committed: false } | { committed: 'unknown' };

/** What a reconcile hook gets: the input and the key to look the outcome up by. */
export type ReconcileContext<I> = {
  input: I;
  key: IdempotencyKey;
  /** The bounded key string sent downstream on every attempt. */
  idempotencyKey: string;
  signal: AbortSignal;
};

/**
 * The declaration of one side-effecting operation.
 *
 * @example
 * const createAsset = defineOperation({
 *   name: 'assets.create', namespace: 'acme/assets.create', version: 'v1',
 *   input: z.object({ taskId: z.string(), asset: z.string(), traceId: z.string().optional() }),
 *   effect: (i) => ({ asset: i.asset }),          // traceId stays out of the fingerprint
 *   resourceKey: (i) => `task:${i.taskId}`,
 *   retention: '24h', lease: '10s', downstream: 'idempotent',
 * });
 */
export type OperationDefinition<S extends z.ZodType, R = unknown> = {
  /** Operation name, e.g. `assets.create`; part of the fingerprint. */
  name: string;
  /** Key namespace: action type and tenant, e.g. `acme/assets.create`, or a function of the input. */
  namespace: string | ((input: z.output<S>) => string);
  /** Policy version; part of the key, so a changed policy never replays an old result. */
  version: string;
  /** zod schema of the job input; validated on enqueue and on every attempt. */
  input: S;
  /** Picks the effect-bearing fields (amount, recipient, asset...) that form the fingerprint. */
  effect: (input: z.output<S>) => unknown;
  /**
   * The BullMQ queue of the operation's jobs, where `idem.enqueue()` adds them and `idem.worker()`
   * consumes them (see `createIdempotency`), so producer and worker never name it apart.
   * @defaultValue the operation's `name`
   */
  queue?: string;
  /** Derives the resource key from the input, for jobs enqueued without the producer helper. */
  resourceKey?: (input: z.output<S>) => string | undefined;
  /** How long a completed or failed record replays. Must cover the longest retry path. */
  retention: Duration;
  /** Ledger lease per attempt, renewed while the processor runs; shorter than the worker's lockDuration. */
  lease: Duration;
  /** How the downstream behaves on a repeat; decides what a crashed attempt means. */
  downstream: Downstream;
  /** Looks up the outcome of an ambiguous attempt; required when `downstream` is `'reconcile'`. */
  reconcile?: (ctx: ReconcileContext<z.output<S>>) => Promise<ReconcileOutcome>;
  /** zod schema of the result; checked before it is recorded. */
  result?: z.ZodType<R>;
  /**
   * Top-level fields of the result that BullMQ may keep in clear (`returnvalue`, flows' children
   * values, dashboards). The whole result is always sealed in the ledger and in BullMQ; without
   * this list BullMQ holds it only sealed (fail closed). Needs a `result` schema.
   * @defaultValue `[]`
   */
  publicResult?: readonly (keyof R & string)[];
  /**
   * Top-level input fields that carry secrets or personal data: `enqueue` seals them with the
   * keyring, so the job data in Redis holds them only sealed, and the wrapper opens them before
   * the input is validated. Jobs added without the producer helper may carry them in clear.
   * @defaultValue `[]`
   */
  sensitiveInput?: readonly string[];
  /** Extra parts of the retry window: a custom backoff's longest delay, an operator replay window. */
  retryWindow?: { customBackoffMax?: Duration; operatorReplay?: Duration };
  /**
   * The longest `timeout` a `ctx.confirm()` of this operation may ask for. It is part of the retry
   * window, so retention must cover it: the steps done before a confirmation, and the request
   * itself, are still protected when the answer comes at the last moment. Without it, each
   * `ctx.confirm()` checks its own timeout against retention when it is called.
   */
  maxConfirmationTimeout?: Duration;
};

/** A defined operation: validation, key and fingerprint, and the producer helpers. */
export type Operation<S extends z.ZodType = z.ZodType, R = unknown, P extends string = string> = {
  readonly name: string;
  /** The result fields BullMQ keeps in clear (see `publicResult`); a type-only mark of them. */
  readonly publicResult: readonly P[];
  /** The input fields sealed in job data (see `sensitiveInput`). */
  readonly sensitiveInput: readonly string[];
  readonly version: string;
  readonly downstream: Downstream;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly retryWindow: RetryWindowOptions;
  /** See `maxConfirmationTimeout`; undefined when the operation declares none. */
  readonly maxConfirmationTimeoutMs: number | undefined;
  readonly definition: OperationDefinition<S, R>;
  /** Validates raw input; throws {@link InvalidInputError}. */
  parseInput(raw: unknown): z.output<S>;
  /** The key for this input: the explicit resource key, else `resourceKey(input)`; throws {@link MissingIdempotencyKeyError}. */
  keyFor(input: z.output<S>, resourceKey?: string): IdempotencyKey;
  /** Keyed fingerprint of the effect-bearing fields, with the keyring's current key or `keyId`. */
  fingerprintOf(input: z.output<S>, keyring: Keyring, keyId?: string): string;
  /** Checks a result against the result schema; returns the value itself (never the parsed copy). */
  parseResult(value: unknown): R;
  /** Enqueues one job with its key made now, before the first attempt. */
  enqueue(queue: Queue, input: z.input<S>, options?: EnqueueOptions): Promise<EnqueueResult>;
  /** Enqueues many jobs in one round trip. */
  enqueueBulk(queue: Queue, items: { input: z.input<S>; options?: EnqueueOptions }[]): Promise<EnqueueResult[]>;
};

/** An operation but its producer helpers, which `defineOperation` (define-operation.ts, beside it) adds. */
export type OperationCore<S extends z.ZodType = z.ZodType, R = unknown, P extends string = string> = Omit<
  Operation<S, R, P>,
  'enqueue' | 'enqueueBulk'
>;

/** Validates a declaration and makes all of its operation but `enqueue` and `enqueueBulk`. */
export function operationCore<S extends z.ZodType, R = unknown, const P extends readonly (keyof R & string)[] = []>(
  def: OperationDefinition<S, R> & { publicResult?: P },
): OperationCore<S, R, P[number]> {
  if (!def.name || typeof def.name !== 'string') {
    throw new IdempotencyConfigError('Operation name is required', { option: 'name' });
  }
  const leaseMs = toMs(def.lease, 'lease');
  const retentionMs = toMs(def.retention, 'retention');
  if (!['idempotent', 'reconcile', 'none'].includes(def.downstream)) {
    throw new IdempotencyConfigError(`downstream must be 'idempotent', 'reconcile' or 'none'`, {
      option: 'downstream',
    });
  }
  if (def.downstream === 'reconcile' && !def.reconcile) {
    throw new IdempotencyConfigError(`Operation ${def.name}: downstream 'reconcile' needs a reconcile hook`, {
      option: 'reconcile',
    });
  }
  const retryWindow: RetryWindowOptions = {};
  if (def.retryWindow?.customBackoffMax !== undefined) {
    retryWindow.customBackoffMaxMs = toMs(def.retryWindow.customBackoffMax, 'retryWindow.customBackoffMax');
  }
  if (def.retryWindow?.operatorReplay !== undefined) {
    retryWindow.operatorReplayMs = toMs(def.retryWindow.operatorReplay, 'retryWindow.operatorReplay');
  }
  const maxConfirmationTimeoutMs =
    def.maxConfirmationTimeout === undefined ? undefined : toMs(def.maxConfirmationTimeout, 'maxConfirmationTimeout');
  if (maxConfirmationTimeoutMs !== undefined) {
    retryWindow.confirmationTimeoutMs = maxConfirmationTimeoutMs;
    // Refused now rather than at the first job: even one attempt with BullMQ's defaults waits this long.
    assertRetentionCovers(def.name, retentionMs, retryWindowMs({}, {}, retryWindow));
  }
  // Validate the version once, through the key schema, so a bad version fails at definition.
  parseIdempotencyKey({ namespace: 'n', resourceKey: 'r', version: def.version });

  const publicResult = [...(def.publicResult ?? [])] as P[number][];
  if (publicResult.length > 0 && !def.result) {
    throw new IdempotencyConfigError(`Operation ${def.name}: publicResult needs a result schema`, {
      option: 'publicResult',
    });
  }
  const sensitiveInput = [...(def.sensitiveInput ?? [])];
  for (const f of [...publicResult, ...sensitiveInput]) {
    if (typeof f !== 'string' || f.length === 0 || f === '__proto__') {
      throw new IdempotencyConfigError(`Operation ${def.name}: field names must be non-empty strings`, {
        option: 'publicResult',
      });
    }
  }
  checkDeclaredFields(def.name, 'sensitiveInput', sensitiveInput, def.input, 'input');
  if (def.result) checkDeclaredFields(def.name, 'publicResult', publicResult, def.result, 'result');
  return {
    name: def.name,
    publicResult: Object.freeze(publicResult),
    sensitiveInput: Object.freeze(sensitiveInput),
    version: def.version,
    downstream: def.downstream,
    leaseMs,
    retentionMs,
    retryWindow,
    maxConfirmationTimeoutMs,
    definition: def,
    parseInput(raw) {
      const parsed = def.input.safeParse(raw);
      if (!parsed.success) throw new InvalidInputError(`input of ${def.name}`, zodIssues(parsed.error, def.input));
      return parsed.data;
    },
    keyFor(input, resourceKey) {
      const rk = resourceKey ?? def.resourceKey?.(input);
      if (rk === undefined || rk === '') throw new MissingIdempotencyKeyError({ operation: def.name });
      const namespace = typeof def.namespace === 'function' ? def.namespace(input) : def.namespace;
      return parseIdempotencyKey({ namespace, resourceKey: rk, version: def.version });
    },
    fingerprintOf(input, keyring, keyId) {
      return keyedFingerprint(keyring, def.name, def.effect(input), keyId);
    },
    parseResult(value) {
      if (!def.result) return value as R;
      const parsed = def.result.safeParse(value);
      if (!parsed.success) throw new InvalidInputError(`result of ${def.name}`, zodIssues(parsed.error, def.result));
      // The processor's own value is recorded, exactly: the schema checks it, never rewrites it.
      return value as R;
    },
  };
}

/**
 * The top-level fields of an object schema (through `.transform()`/`.pipe()`, `.optional()`,
 * `.nullable()`, `.default()`, `.readonly()`), or undefined for a schema that is not an object.
 */
function topLevelFields(schema: z.ZodType): readonly string[] | undefined {
  type Def = { type?: string; shape?: object; in?: unknown; innerType?: unknown };
  const defOf = (s: unknown) => (s as { _zod?: { def?: Def } } | undefined)?._zod?.def;
  let def = defOf(schema);
  for (let depth = 0; def && depth < 8; depth++) {
    if (def.type === 'object') return Object.keys(def.shape ?? {});
    def = defOf(def.type === 'pipe' ? def.in : def.innerType);
  }
  return undefined;
}

/**
 * A declared field list (`sensitiveInput`, `publicResult`) names top-level fields of its schema.
 * A name that is no field (a typo, a nested path such as `card.number`) was silently ignored, and
 * a field meant to be sealed travelled in clear: it is refused when the operation is defined.
 */
function checkDeclaredFields(
  operation: string,
  option: 'sensitiveInput' | 'publicResult',
  names: readonly string[],
  schema: z.ZodType,
  what: 'input' | 'result',
): void {
  if (names.length === 0) return;
  const fields = topLevelFields(schema);
  if (!fields) {
    throw new IdempotencyConfigError(
      `Operation ${operation}: ${option} needs an object ${what} schema (z.object) whose fields it names`,
      { option },
    );
  }
  const unknown = names.filter((n) => !fields.includes(n));
  if (unknown.length === 0) return;
  const nested = unknown.some((n) => n.includes('.') || n.includes('['));
  throw new IdempotencyConfigError(
    `Operation ${operation}: ${option} names ${unknown.map((n) => `'${n}'`).join(', ')}, not a top-level field of the ${what} schema (its fields: ${fields.join(', ') || 'none'})` +
      (nested ? '; nested paths are not supported: name the top-level field that holds the value' : ''),
    { option, fields: unknown },
  );
}
