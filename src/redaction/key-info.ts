import { secretNameKind } from '../scanners/index.js';
import { normalizeName } from './normalize-name.js';
import type { KeyInfo, PolicyEngine } from './policy-engine.js';

/** The cache is dropped when it grows past this; realistic events have a few hundred distinct keys. */
const MAX_CACHED_KEYS = 10_000;

/** What a walk has left to scan (characters); shared by the walker and the keys it looks up. */
export type ScanBudget = { remaining: number };

/**
 * A key too long to be a name (or past the scan budget): it is replaced by an opaque reference,
 * never scanned, so its cost is one HMAC over it.
 */
function dataKey(engine: PolicyEngine, key: string, rule: string): KeyInfo {
  const outKey = engine.keyring.opaqueRef(key);
  return { outKey, norm: normalizeName(outKey), byName: undefined, hasPathRules: false, keyHits: [[rule, 1]] };
}

/**
 * Class and scan result of an object key. The class is decided on the scanned key, so that the
 * second redaction of a value sees the same keys and decides the same way (idempotence). A
 * name no rule matches is a secret when its words say so (`userPassword`), unless the policy
 * left out the defaults.
 */
export function keyInfo(engine: PolicyEngine, key: string, budget?: ScanBudget): KeyInfo {
  const cached = engine.keys.get(key);
  if (cached) return cached;
  if (key.length > engine.limits.maxKeyLength) return dataKey(engine, key, 'limit.key');
  if (budget !== undefined) {
    if (budget.remaining < key.length) return dataKey(engine, key, 'limit.budget');
    budget.remaining -= key.length;
  }
  const hits: [string, number][] = [];
  // A reference this policy made (a long key replaced earlier) is kept as it is.
  const outKey =
    engine.keyring.recognise(key, 'ref') !== undefined
      ? key
      : engine.scanner.scan(key, {
          hit(rule) {
            const id = rule.includes('.') ? rule : `scan.${rule}`;
            const entry = hits.find((h) => h[0] === id);
            if (entry) entry[1]++;
            else hits.push([id, 1]);
          },
        });
  const norm = normalizeName(outKey);
  const byName =
    engine.matcher.byName(norm) ??
    (engine.inferSecretNames && secretNameKind(outKey) !== undefined ? ('secret' as const) : undefined);
  const info: KeyInfo = {
    outKey,
    norm,
    byName,
    hasPathRules: engine.matcher.pathRules(norm) !== undefined,
    keyHits: hits.length === 0 ? undefined : hits,
  };
  if (engine.keys.size >= MAX_CACHED_KEYS) engine.keys.clear();
  engine.keys.set(key, info);
  return info;
}
