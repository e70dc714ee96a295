import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { errorLabel } from '../errors/clean-name.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { Keyring } from '../sealing/keyring.js';
import { type AuditRedaction, auditPolicyFor, keyedAuditPolicy } from './audit-policy.js';

const OPTION = 'BQI_REDACTION';

function refused(message: string, facts: Record<string, unknown> = {}): IdempotencyConfigError {
  return new IdempotencyConfigError(`${OPTION}: ${message}`, { option: OPTION, ...facts });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What a module gives as the trail's rules: its `redaction` export, else its default export (an
 * ES module's, or a CommonJS module's `module.exports`, or its `redaction` property).
 */
function exported(mod: Record<string, unknown>): unknown {
  if (mod.redaction !== undefined) return mod.redaction;
  const d = mod.default;
  if (isObject(d) && d.redaction !== undefined && d.version === undefined) return d.redaction;
  return d;
}

/**
 * Loads the trail's redaction rules from `path` (relative to `cwd`): a JavaScript module (`.js`,
 * `.mjs`, `.cjs`) whose `redaction` or default export is them, or a `.json` file that is them.
 * They are what the runtime's `audit.redaction` takes: the policy's input without `hmacKeys`, or
 * a compiled policy (checked later against the keyring, see `keyedAuditPolicy`).
 *
 * @throws IdempotencyConfigError (`IDEMPOTENCY_CONFIG`, option `BQI_REDACTION`) when the file is
 * missing, cannot be loaded, or exports no object
 */
export async function loadRedactionModule(path: string, cwd: string = process.cwd()): Promise<AuditRedaction> {
  const file = resolve(cwd, path);
  const found = await stat(file).then(
    (s) => (s.isFile() ? 'file' : 'other'),
    () => 'none',
  );
  if (found === 'none') throw refused(`no such file: ${file}`, { path: file });
  if (found === 'other') throw refused(`not a file: ${file}`, { path: file });
  let mod: Record<string, unknown>;
  try {
    mod = file.endsWith('.json')
      ? { default: JSON.parse(await readFile(file, 'utf8')) }
      : ((await import(pathToFileURL(file).href)) as Record<string, unknown>);
  } catch (err) {
    // The error's class or code only: a module's message may quote its own text.
    throw refused(`cannot load ${file} (${errorLabel(err)})`, { path: file, reason: errorLabel(err) });
  }
  const rules = exported(mod);
  if (!isObject(rules)) {
    throw refused(
      `${file} exports no redaction policy: export it as \`redaction\` or as the default export ` +
        "(its input without hmacKeys, e.g. { version: '2026-01', details: { … } })",
      { path: file },
    );
  }
  return rules as AuditRedaction;
}

/**
 * The trail's policy of a process configured from the environment: `redaction` when given, else
 * the rules of the `BQI_REDACTION` module, keyed from the keyring; the built-in rules when there
 * are none ({@link auditPolicyFor}).
 *
 * @throws IdempotencyConfigError (`IDEMPOTENCY_CONFIG`) for rules without a keyring, a module that
 * cannot be loaded, or rules the policy's schema refuses
 */
export async function configuredAuditPolicy(
  config: { keyring?: Keyring; redactionModule?: string },
  redaction?: AuditRedaction,
): Promise<RedactionPolicy> {
  // Where the rules came from, as errors name it: the option, or the variable.
  const named = redaction === undefined ? OPTION : 'redaction';
  const rules =
    redaction ?? (config.redactionModule === undefined ? undefined : await loadRedactionModule(config.redactionModule));
  if (rules === undefined) return auditPolicyFor(config.keyring);
  if (!config.keyring) {
    throw new IdempotencyConfigError(
      `${named} needs a keyring (BQI_KEYRING): the policy is keyed from it, so its references match the workers' ones`,
      { option: named },
    );
  }
  try {
    return keyedAuditPolicy(config.keyring, rules, named);
  } catch (err) {
    // defineRedactionPolicy's refusal names `redactionPolicy`: say where the rules came from.
    if (err instanceof IdempotencyConfigError && err.details.option === 'redactionPolicy') {
      throw new IdempotencyConfigError(`${named}: ${err.message}`, { ...err.details, option: named });
    }
    throw err;
  }
}
