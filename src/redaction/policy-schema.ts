import { z } from 'zod';
import { SCANNER_IDS } from '../scanners/index.js';
import { fieldPatternProblem } from './field-pattern.js';
import { BUILTIN_IDENTIFIER_FORMATS, type IdentifierFormat } from './identifier-formats.js';

/** Key under which {@link redactDetails} summarises omitted keys; never allow-listable. */
export const OMITTED_KEY = '_omitted';

const fieldPattern = z.string().superRefine((pattern, ctx) => {
  const problem = fieldPatternProblem(pattern);
  if (problem) ctx.addIssue({ code: 'custom', message: `field pattern ${JSON.stringify(pattern)} ${problem}` });
});

const patterns = z.array(fieldPattern).max(1000);

const hmacSecret = z
  .union([z.string(), z.instanceof(Uint8Array)])
  .refine((s) => (typeof s === 'string' ? Buffer.byteLength(s) : s.byteLength) >= 32, {
    message: 'an HMAC key needs at least 32 bytes',
  });

const hmacKey = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9._-]{1,32}$/, 'a key id is 1-32 characters of A-Z a-z 0-9 . _ -'),
  secret: hmacSecret,
});

const customScanner = z.union([
  z.strictObject({
    id: z.string(),
    pattern: z.instanceof(RegExp),
  }),
  z.strictObject({
    id: z.string(),
    scan: z.custom<(text: string) => string>((v) => typeof v === 'function', { message: 'scan must be a function' }),
  }),
]);

const customScanners = z
  .array(customScanner)
  .max(64)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((s, i) => {
      const problem = !/^[a-z][a-z0-9_]{1,31}$/.test(s.id)
        ? 'a scanner id is 2-32 characters of a-z 0-9 _, starting with a letter'
        : (SCANNER_IDS as readonly string[]).includes(s.id)
          ? `${JSON.stringify(s.id)} is a built-in scanner id`
          : seen.has(s.id)
            ? `scanner id ${JSON.stringify(s.id)} is listed twice`
            : undefined;
      if (problem) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: problem });
      seen.add(s.id);
    });
  });

/** Event fields an identifier format may be declared for (`'*'`: every identifier field). */
export const IDENTIFIER_FORMAT_FIELDS = [
  '*',
  'actorId',
  'resourceId',
  'taskId',
  'stepId',
  'operationId',
  'operation',
  'jobId',
  'queue',
  'reasonCode',
  'beforeStateRef',
  'afterStateRef',
] as const;

const identifierFormat = z.union([
  z.enum(BUILTIN_IDENTIFIER_FORMATS),
  z.instanceof(RegExp),
  z.strictObject({
    prefix: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,31}$/,
        'a prefix is 1-32 characters of A-Z a-z 0-9 _ . : -, starting with a letter or digit',
      ),
    body: z.instanceof(RegExp).optional(),
  }),
  z.custom<(value: string) => boolean>((v) => typeof v === 'function', {
    message: 'a format is a built-in name, a RegExp, { prefix } or a function',
  }),
]) as z.ZodType<IdentifierFormat, IdentifierFormat>;

const identifierFormats = z
  .partialRecord(z.enum(IDENTIFIER_FORMAT_FIELDS), z.array(identifierFormat).max(64))
  .default({});

const detailKey = z
  .string()
  .min(1)
  .max(200)
  .refine((k) => k !== OMITTED_KEY, { message: `${OMITTED_KEY} is reserved for the summary of omitted keys` });

/**
 * The input of {@link defineRedactionPolicy}. Every part but `version` and `hmacKeys` has a default.
 *
 * @example
 * defineRedactionPolicy({
 *   version: '2025-06',
 *   hmacKeys: [{ id: 'k2', secret: process.env.AUDIT_HMAC_K2! }, { id: 'k1', secret: process.env.AUDIT_HMAC_K1! }],
 *   fields: { identifier: ['tenantId'], pii: ['recipient.name'] },
 *   allow: ['nextPageToken'],
 *   details: { 'payments.charge': ['amount', 'currency'], '*': ['reason'] },
 * });
 */
export const redactionPolicySchema = z.strictObject({
  /** Recorded in every receipt; change it whenever the rules change. */
  version: z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, 'a version is 1-64 characters of A-Z a-z 0-9 . _ : -'),
  /** HMAC-SHA-256 keys; the first makes new references, the others are still recognised (rotation). */
  hmacKeys: z
    .array(hmacKey)
    .min(1, 'at least one HMAC key is needed')
    .max(16)
    .refine((keys) => new Set(keys.map((k) => k.id)).size === keys.length, { message: 'key ids must be unique' }),
  /**
   * Add the built-in rules (`DEFAULT_FIELD_RULES`, `DEFAULT_ALLOWED_FIELDS`), and treat a field
   * that no rule matches as a secret when its words say so (`userPassword`, `x-api-key`,
   * `credentialsUsed`; see `secretNameKind`).
   * @defaultValue true
   */
  includeDefaults: z.boolean().default(true),
  /** Field rules per class: `apiKey` (a name), `*token` (a name suffix), `user.name` (a path). */
  fields: z
    .strictObject({
      secret: patterns.optional(),
      credential_ref: patterns.optional(),
      identifier: patterns.optional(),
      pii: patterns.optional(),
      content: patterns.optional(),
    })
    .prefault({}),
  /** Fields exempt from the classes (their values still go through the value scanners). */
  allow: patterns.default([]),
  /** Allow-listed `details` keys per action; `'*'` applies to every action. Unlisted keys are omitted. */
  details: z.record(z.string().min(1).max(200), z.array(detailKey).max(1000)).default({}),
  /**
   * Identifier formats the application declares, per event field or `'*'` for every identifier
   * field: a value that matches one stays in clear (UUIDs, ULIDs, KSUIDs and ObjectIds do without
   * being declared); anything else that the default grammar refuses becomes a keyed ref. A
   * format is a built-in name (`'ulid'`, `'trace-id'`…), a RegExp the whole value must match
   * (keep it linear), `{ prefix, body? }` (the prefix, then 1-64 letters and digits or `body`),
   * or a predicate.
   * @defaultValue {}
   * @example identifiers: { taskId: ['ulid', /^task-[a-z]+-[0-9a-f]{4,12}$/], '*': [{ prefix: 'cus_' }] }
   */
  identifiers: identifierFormats,
  /** Scanners to switch off (for example `phone` where long numbers with separators are common). */
  disabledScanners: z.array(z.enum(SCANNER_IDS)).default([]),
  /**
   * The policy's own value scanners (a regular expression or a function, with an id), run before
   * the built-in ones on every string; a match becomes `[redacted:<id>]`, a hit `scan.<id>`.
   * @defaultValue []
   * @example scanners: [{ id: 'acme_ticket', pattern: /ACME-[0-9]{8}/g }]
   */
  scanners: customScanners.default([]),
  limits: z
    .strictObject({
      /**
       * Longer strings are replaced by a content summary (and cut in `redactString`).
       * @defaultValue 65536
       */
      maxStringLength: z
        .int()
        .min(1024)
        .max(16 * 1024 * 1024)
        .default(65_536),
      /**
       * Deeper values are replaced by `[redacted:depth]`.
       * @defaultValue 32
       */
      maxDepth: z.int().min(1).max(1000).default(32),
      /**
       * Paths listed in one receipt.
       * @defaultValue 200
       */
      maxReceiptPaths: z.int().min(0).max(100_000).default(200),
      /**
       * Longer object keys are data, not names: they are replaced by an opaque reference
       * (`ref:<keyId>:…`) instead of being scanned.
       * @defaultValue 256
       */
      maxKeyLength: z.int().min(32).max(65_536).default(256),
      /**
       * Characters of strings and keys one `redact` call scans. Past it, strings become content
       * summaries and keys opaque references (fail closed), so that the time one call blocks the
       * event loop is bounded whatever the value holds.
       * @defaultValue 4194304
       */
      scanBudget: z
        .int()
        .min(1024)
        .max(1 << 30)
        .default(4 * 1024 * 1024),
    })
    .prefault({}),
});

/** What {@link defineRedactionPolicy} accepts. */
export type RedactionPolicyInput = z.input<typeof redactionPolicySchema>;
