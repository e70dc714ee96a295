import { normalizeName } from './normalize-name.js';
import type { KeyInfo, PolicyEngine } from './policy-engine.js';
import { scanText } from './scanners/scan-text.js';

/** Keys longer than this are not cached (they are data, not field names, and would bloat the cache). */
const MAX_CACHED_KEY = 128;
/** The cache is dropped when it grows past this; realistic events have a few hundred distinct keys. */
const MAX_CACHED_KEYS = 10_000;

/**
 * Class and scan result of an object key. The class is decided on the scanned key, so that the
 * second redaction of a value sees the same keys and decides the same way (idempotence).
 */
export function keyInfo(engine: PolicyEngine, key: string): KeyInfo {
  const cached = engine.keys.get(key);
  if (cached) return cached;
  let hits: string[] | undefined;
  const outKey = scanText(key, engine.scanners, {
    hit(rule) {
      hits ??= [];
      hits.push(`scan.${rule}`);
    },
  });
  const norm = normalizeName(outKey);
  const info: KeyInfo = {
    outKey,
    norm,
    byName: engine.matcher.byName(norm),
    hasPathRules: engine.matcher.pathRules(norm) !== undefined,
    keyHits: hits,
  };
  if (key.length <= MAX_CACHED_KEY) {
    if (engine.keys.size >= MAX_CACHED_KEYS) engine.keys.clear();
    engine.keys.set(key, info);
  }
  return info;
}
