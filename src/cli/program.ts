import { Command, InvalidArgumentError, Option } from 'commander';
import type { ConnectionFlags } from '../config/env.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { DURATION_FORMS, parseDurationText } from '../operation/duration.js';
import { packageVersion } from '../shared/package-version.js';
import { defaultActor, MAX_ACTOR_LENGTH } from './actor.js';
import { withoutArgumentValues } from './argument-echo.js';
import { registerOperatorCommands } from './commands/operators.js';
import type { CliContext, Output } from './context.js';

// Command modules are imported when their command runs: `--help` and usage errors never load
// BullMQ, pg or zod, and a Postgres-only command never loads BullMQ.

// ---- argument parsers (their errors are usage errors: exit 2) ----

function parseKeyArg(text: string): string {
  if (text.trim().length === 0) throw new InvalidArgumentError('the key must not be empty.');
  return text.trim();
}

function parseDateArg(text: string): Date {
  const d = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(d.getTime())) {
    throw new InvalidArgumentError('expected an ISO 8601 time, e.g. 2025-01-31 or 2025-01-31T12:00:00Z.');
  }
  return d;
}

function parsePositiveIntArg(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('expected a positive whole number.');
  }
  return n;
}

function parseDurationArg(text: string): number {
  const ms = parseDurationText(text);
  if (ms === undefined) throw new InvalidArgumentError(`expected ${DURATION_FORMS}.`);
  return ms;
}

function parseUrlArg(text: string): string {
  if (text.trim().length === 0) throw new InvalidArgumentError('the URL must not be empty.');
  return text.trim();
}

const LIST_STATUSES = ['unknown', 'locked', 'failed'];
/** Mirrors DEFAULT_LIST_LIMIT of commands/list.ts (not imported: help loads no command module). */
const LIST_LIMIT = 50;

function parseReasonArg(text: string): string {
  if (text.trim().length === 0) throw new InvalidArgumentError('the reason must not be empty.');
  return text;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function parseActorArg(text: string): string {
  const actor = text.trim();
  if (actor.length === 0 || actor.length > MAX_ACTOR_LENGTH || CONTROL.test(actor)) {
    throw new InvalidArgumentError(`expected 1 to ${MAX_ACTOR_LENGTH} printable characters.`);
  }
  return actor;
}

const KEY_HELP = 'the bounded key (ctx.idempotencyKey: namespace:resourceKey:version, percent-encoded parts)';
const REASON_HELP = 'why (kept in the audit event; scanned by the redaction policy, cut to 500 characters)';

// Options several commands take, made in one place so they parse and read the same everywhere.
const jsonOption = (help = 'machine-readable output') => new Option('--json', help);
const reasonOption = (help = REASON_HELP) => new Option('--reason <text>', help).argParser(parseReasonArg);
const actorOption = (who: string) =>
  new Option('--actor <id>', `${who}, for the audit trail`).argParser(parseActorArg).default(defaultActor());

const ROOT_HELP = `
Environment (the connection flags above win over it):
  DATABASE_URL     Postgres of the ledger and the audit trail (postgres://...)
  REDIS_URL        Redis of the queues (redis://...): start, inspect --job, invalidate --rerun and backfill only
  BQI_SCHEMA       schema of the library's tables (default public)
  BQI_PREFIX       BullMQ prefix (default bull)
  BQI_AUDIT_QUEUE  audit queue (default bullmq-idempotency-audit)
  BQI_KEYRING      keys of sealed values, id:base64:... comma-separated, the current key first:
                   inspect --decrypt and resolve --committed only (never printed)

Exit codes (a failure prints CODE: message on stderr, its code from the Errors table in docs/api.md):
  0 ok · 1 other failure (start: shutdown deadline passed) · 2 bad arguments (a malformed key too)
  3 missing or bad configuration, a database or role that does not exist, refused credentials,
    or a schema not migrated (start: an HTTP port it cannot listen on)
  4 Postgres or Redis unreachable (refused, timed out, unresolvable) · 5 not found
  6 illegal transition · 130 interrupted`;

/** The global connection flags, as commander names them. */
type GlobalOptions = { databaseUrl?: string; redisUrl?: string; schema?: string; prefix?: string };

function connectionFlags(program: Command): ConnectionFlags {
  const o = program.opts<GlobalOptions>();
  return {
    ...(o.databaseUrl !== undefined ? { databaseUrl: o.databaseUrl } : {}),
    ...(o.redisUrl !== undefined ? { redisUrl: o.redisUrl } : {}),
    ...(o.schema !== undefined ? { schema: o.schema } : {}),
    ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
  };
}

/**
 * The CLI's commands. `env` and `io` are injectable for tests; errors thrown by the actions are
 * mapped to exit codes by the caller (see main.ts and errors.ts).
 */
export function buildProgram(options: { env?: Record<string, string | undefined>; io?: Output } = {}): Command {
  const env = options.env ?? process.env;
  const withContext = async (fn: (ctx: CliContext) => Promise<void>) => {
    const [{ loadCliConfig }, { CliContext, stdio }] = await Promise.all([
      import('../config/env.js'),
      import('./context.js'),
    ]);
    const ctx = new CliContext(loadCliConfig(env, connectionFlags(program)), options.io ?? stdio);
    try {
      await fn(ctx);
    } finally {
      await ctx.close();
    }
  };
  /**
   * The action of a command whose module `load` imports when it runs: it runs with the command's
   * arguments and options (commander's trailing Command dropped) in a CLI context.
   */
  const lazy =
    <A extends unknown[]>(load: () => Promise<(ctx: CliContext, ...args: A) => Promise<void>>) =>
    async (...args: [...A, Command]) => {
      const command = await load();
      await withContext((ctx) => command(ctx, ...(args.slice(0, -1) as A)));
    };
  const write = (fd: 'out' | 'err') => (s: string) => {
    if (options.io) (fd === 'out' ? options.io.outRaw : options.io.errRaw)(s);
    else (fd === 'out' ? process.stdout : process.stderr).write(s);
  };

  const program = new Command('bullmq-idempotency')
    .description('Operate the bullmq-idempotency ledger and audit trail.')
    .version(packageVersion(), '-V, --version')
    // Set before the subcommands are added: they inherit both.
    .exitOverride()
    .configureOutput({
      writeOut: write('out'),
      writeErr: write('err'),
      // A refused value may be a secret typed in the wrong place: commander's message names it back.
      // Its usage errors take the code every other failure prints (`IDEMPOTENCY_USAGE: …`).
      outputError: (message, writeErr) =>
        writeErr(withoutArgumentValues(message, program).replace(/^(?:error: )?/, `${ERROR_CODES.usage}: `)),
    })
    .showHelpAfterError('(add --help for usage)')
    .showSuggestionAfterError(true)
    .configureHelp({ showGlobalOptions: true })
    .addHelpText('after', ROOT_HELP)
    .option('--database-url <url>', 'Postgres of the ledger and the audit trail (instead of DATABASE_URL)', parseUrlArg)
    .option('--redis-url <url>', 'Redis of the queues (instead of REDIS_URL)', parseUrlArg)
    .option('--schema <name>', "schema of the library's tables (instead of BQI_SCHEMA)")
    .option('--prefix <prefix>', 'BullMQ prefix (instead of BQI_PREFIX)');

  program
    .command('start')
    .description('run the operations process: audit writer, audit backfill worker, ledger sweeper (until SIGTERM)')
    .addHelpText(
      'after',
      `
Runs until SIGTERM or SIGINT, then lets active jobs finish within BQI_SHUTDOWN_TIMEOUT_MS.
Also reads BQI_AUDIT_QUEUE, BQI_AUDIT_CONCURRENCY, BQI_SWEEP_EVERY_MS, BQI_SHUTDOWN_TIMEOUT_MS,
BQI_PREPARED_STATEMENTS, BQI_KEYRING, LOG_LEVEL, and BQI_HTTP_PORT / BQI_HTTP_HOST (serve
/healthz, /readyz and /metrics). Durations: ${DURATION_FORMS}. Logs are JSON lines on stdout.

Exit codes: 0 stopped cleanly · 1 shutdown deadline passed, or another failure · 3 bad
configuration (a database or role that does not exist, refused credentials too), schema not
migrated, HTTP port unavailable · 4 Postgres or Redis unreachable (refused, timed out, unresolvable).

Examples:
  $ bullmq-idempotency start
  $ BQI_HTTP_PORT=9464 bullmq-idempotency start --database-url postgres://app@db/app --redis-url redis://redis:6379`,
    )
    .action(async () => {
      const { runOperationsProcess } = await import('../ops/run.js');
      process.exit(await runOperationsProcess({ env, flags: connectionFlags(program) }));
    });

  program
    .command('migrate')
    .description("create or upgrade the library's tables in BQI_SCHEMA (safe to run concurrently)")
    .addOption(jsonOption())
    .action(lazy(async () => (await import('./commands/migrate.js')).migrateCommand));

  program
    .command('inspect')
    .description('show the ledger record of a key (or of the key a job carries); sealed values stay sealed')
    .argument('<key>', `${KEY_HELP}; with --job, the job id`, parseKeyArg)
    .option('--job <queue>', 'read the key from the data envelope of job <key> in <queue> (needs REDIS_URL)')
    .addOption(jsonOption('machine-readable output (the stored forms: sealed values as sealed strings)'))
    .option(
      '--decrypt',
      'open the sealed result and error text with BQI_KEYRING and print them (needs --reason; audited first)',
    )
    .addOption(reasonOption(`with --decrypt: ${REASON_HELP}`))
    .addOption(actorOption('with --decrypt: who opens'))
    .addHelpText(
      'after',
      `
Sealed values are shown by what is in clear and where the rest is:
  result:  {"chargeId":"ch_1"} + sealed (key k1, 212 bytes)
  error:   CARD_DECLINED (TerminalError): sealed message, 31 bytes; text sealed (key k1, 840 bytes)

--decrypt writes an operator.decrypt audit event (actor, key, what was opened, reason) before it
prints anything; if that write fails, or a value is sealed with a key BQI_KEYRING does not hold
(IDEMPOTENCY_SEAL_KEY_UNKNOWN), nothing is printed and the exit code is 1.

Examples:
  $ bullmq-idempotency inspect 'acme%2Fassets.create:task%3A42:v1'
  $ bullmq-idempotency inspect --job assets idem_Qm9v... --json
  $ BQI_KEYRING=... bullmq-idempotency inspect KEY --decrypt --reason 'refund dispute, case 1234'`,
    )
    .action(lazy(async () => (await import('./commands/inspect.js')).inspectCommand));

  program
    .command('invalidate')
    .description('evict a key whatever its state: the next claim executes again (fences any current holder)')
    .argument('<key>', KEY_HELP, parseKeyArg)
    .addOption(reasonOption().makeOptionMandatory())
    .addOption(actorOption('who acts'))
    .option('--rerun', "then retry the key's finished job, so the operation runs again now (needs REDIS_URL)")
    .option('--queue <name>', "with --rerun: the job's queue, when the record names none")
    .addOption(jsonOption())
    .addHelpText(
      'after',
      `
Invalidating alone does not run anything: while the key's old job exists (completed or failed,
kept by BullMQ), an enqueue of the same key is absorbed by its job id and nothing runs.
--rerun retries that job after the invalidation (attempts reset), so it runs exactly once more;
when the job is gone, the next enqueue of the key is added and runs.

Examples:
  $ bullmq-idempotency invalidate KEY --reason 'resend after refund' --rerun
  $ bullmq-idempotency invalidate KEY --reason 'resend' --rerun --queue payments`,
    )
    .action(lazy(async () => (await import('./commands/invalidate.js')).invalidateCommand));

  program
    .command('list')
    .description('the keys in a status (unknown: waiting for an operator), in key order; never results or error text')
    .addOption(new Option('--status <status>', 'which records (any status with --task)').choices(LIST_STATUSES))
    .option('--task <id>', "only this task's records: the task id the application gave (stored in clear or as its ref)")
    .option('--operation <name>', "only this operation's records (its defineOperation name)")
    .option('--limit <n>', 'rows at most', parsePositiveIntArg, LIST_LIMIT)
    .option('--after <key>', 'the next page: keys after this one (the last key shown)')
    .addOption(jsonOption())
    .addHelpText(
      'after',
      `
Each row: key, status, epoch, operation, queue/job, last update, error code.

Examples:
  $ bullmq-idempotency list --status unknown
  $ bullmq-idempotency list --status failed --operation payments.charge --limit 20 --json
  $ bullmq-idempotency list --task task-42`,
    )
    .action(lazy(async () => (await import('./commands/list.js')).listCommand));

  program
    .command('resolve')
    .description('settle a key whose outcome is unknown')
    .argument('<key>', KEY_HELP, parseKeyArg)
    .addOption(
      new Option('--committed', 'the side effect happened: --result is what replays return').conflicts('notCommitted'),
    )
    .addOption(new Option('--not-committed', 'the side effect did not happen: the next claim executes again'))
    .option('--result <json>', 'the outcome, as JSON (with --committed); recorded sealed with BQI_KEYRING')
    .option(
      '--public <fields>',
      "top-level fields of --result kept in clear beside the sealed copy, comma-separated: the operation's publicResult",
    )
    .addOption(reasonOption().makeOptionMandatory())
    .addOption(actorOption('who acts'))
    .addOption(jsonOption())
    .addHelpText(
      'after',
      `
--committed needs BQI_KEYRING: the result is sealed with its current key before it is recorded,
for the key's own row (its operation and key), so a replay returns it sealed like any other; it
is never printed. The CLI does not load operation definitions, so it cannot apply the operation's
result schema, nor know its publicResult fields: without --public no field is kept in clear, and
replays hold the result only sealed (a consumer reading a public field of returnvalue finds none).
--public names those fields, each a top-level field of --result with a value (else refused, and
nothing recorded). To check the result against the schema too, resolve from code with the
operation: idem.resolve(key, { committed: true, result, operation }, { actor, reason }).

Examples:
  $ bullmq-idempotency resolve KEY --committed --result '{"assetId":"a1"}' --reason 'found in the provider dashboard'
  $ bullmq-idempotency resolve KEY --committed --result '{"chargeId":"ch_1","card":"…"}' --public chargeId --reason 'in the PSP dashboard'
  $ bullmq-idempotency resolve KEY --not-committed --reason 'the provider has no record of it'`,
    )
    .action(lazy(async () => (await import('./commands/resolve.js')).resolveCommand));

  const confirmations = program
    .command('confirmations')
    .description('confirmation requests of ctx.confirm(): what waits for a person, and the answers');
  confirmations
    .command('list')
    .description('the requests in id order (--pending: only those waiting); details stay sealed')
    .option('--pending', 'only the requests waiting for an answer')
    .option('--limit <n>', 'rows at most', parsePositiveIntArg, LIST_LIMIT)
    .option('--after <id>', 'the next page: requests after this id (the last one shown)')
    .addOption(jsonOption())
    .action(lazy(async () => (await import('./commands/confirm.js')).confirmationsListCommand));

  program
    .command('confirm')
    .description('answer a confirmation request once (audited as a user decision) and wake the waiting job')
    .argument('<id>', 'the request id (cf-12), as `confirmations list` shows it')
    .addOption(new Option('--approve', 'yes: ctx.confirm() returns approved').conflicts('deny'))
    .addOption(new Option('--deny', 'no: ctx.confirm() returns a denial'))
    .addOption(reasonOption().makeOptionMandatory())
    .addOption(actorOption('who answers'))
    .addOption(jsonOption())
    .addHelpText(
      'after',
      `
An answer is recorded once: the same answer again changes nothing (exit 0); a different one, or
any answer after the request timed out, is refused (exit 6). With REDIS_URL the waiting jobs are
promoted at once; otherwise they find the answer at their next re-check.

Examples:
  $ bullmq-idempotency confirmations list --pending
  $ bullmq-idempotency confirm cf-12 --approve --reason 'invoice 881 checked' --actor alice`,
    )
    .action(lazy(async () => (await import('./commands/confirm.js')).confirmCommand));

  program
    .command('timeline')
    .description('the audit story of a task (or of one operation key): attempts, takeovers, replays, decisions')
    .argument('[taskId]', 'the task id')
    .option('--operation <key>', `an operation instead of a task: ${KEY_HELP}`, parseKeyArg)
    .addOption(jsonOption())
    .action(lazy(async () => (await import('./commands/timeline.js')).timelineCommand));

  program
    .command('backfill')
    .description('derive missing audit events from the ledger and drain the outbox (a job for the worker, or --inline)')
    .option('--since <iso>', 'start again from this time (resets the checkpoint)', parseDateArg)
    .option('--name <checkpoint>', 'checkpoint name: independent backfills keep independent checkpoints', 'default')
    .option('--wait', 'follow the job: live progress (rows, events, rate, ETA) until it completes')
    .option(
      '--timeout <duration>',
      'with --wait: give up (exit 1) when the job has not started, or not moved, for this long: ms, or 30s, 5m, 1h (default 5m)',
      parseDurationArg,
    )
    .option('--inline', 'run the backfill in this process instead of on a worker (Ctrl-C stops it, resumable)')
    .option('--page-size <n>', 'ledger rows per page (--inline)', parsePositiveIntArg)
    .option('--max-rows-per-second <n>', 'rate limit (--inline)', parsePositiveIntArg)
    .addOption(jsonOption('machine-readable result'))
    .action(lazy(async () => (await import('./commands/backfill.js')).backfillCommand));

  program
    .command('sweep')
    .description('delete expired terminal ledger rows now, in bounded batches (never locked or unknown rows)')
    .option('--batch-size <n>', 'rows per statement (default 1000)', parsePositiveIntArg)
    .option('--max-batches <n>', 'statements at most (default 1000)', parsePositiveIntArg)
    .addOption(actorOption('who acts'))
    .addOption(jsonOption())
    .action(lazy(async () => (await import('./commands/sweep.js')).sweepCommand));
  registerOperatorCommands(program, (text) => write('out')(`${text}\n`));

  program
    .command('verify')
    .description('check the audit hash chains: the first event changed, removed or inserted out of order (exit 1)')
    .option('--heads', 'print the head of every chain as JSON, to anchor elsewhere')
    .option('--anchors <file>', 'heads printed earlier by --heads: each must still be in its chain')
    .addOption(jsonOption())
    .action(lazy(async () => (await import('./commands/verify.js')).verifyCommand));

  program
    .command('stats')
    .description('rows per status, oldest lease, unknown outcomes, audit lag, outbox and dead letters')
    .addOption(jsonOption())
    .action(lazy(async () => (await import('./commands/stats.js')).statsCommand));

  return program;
}
