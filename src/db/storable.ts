/**
 * Postgres cannot hold a NUL character in text or jsonb, nor (in jsonb) a lone surrogate, which
 * a string cut in the middle of an emoji contains. One such value makes a whole multi-row
 * statement fail, so free text is made storable before it is written: lone surrogates and NUL
 * become U+FFFD.
 */
export function storableText(text: string): string {
  return text.isWellFormed() && !text.includes('\u0000') ? text : text.toWellFormed().replaceAll('\u0000', '\uFFFD');
}

/** {@link storableText} applied to every string of a JSON-like value, keys included. */
export function storable<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (Array.isArray(value)) return value.map(storable) as T;
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = Object.create(null); // a key may be `__proto__`
    for (const [k, v] of Object.entries(value)) out[storableText(k)] = storable(v);
    return out as T;
  }
  return value;
}
