import { SerializationError } from '../errors/errors.js';

/**
 * RFC 8785 (JSON Canonicalization Scheme) serialisation that refuses anything that is not JSON.
 *
 * Written here rather than taken from a package because the same single walk both validates
 * (undefined, functions, symbols, BigInt, NaN/±Infinity, cycles, lone surrogates and class
 * instances are errors naming the path) and serialises; JSON.stringify would silently drop or
 * coerce those values. Numbers and strings use ECMAScript serialisation, which RFC 8785 adopts;
 * keys are sorted by UTF-16 code units. Objects with `toJSON` (Date) are serialised through it.
 */
export function canonicalJson(value: unknown): string {
  return write(value, '$', new Set());
}

function write(value: unknown, path: string, seen: Set<object>): string {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) fail(path, 'string contains a lone surrogate');
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) fail(path, `${value} is not a JSON number`);
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return fail(path, 'undefined is not JSON');
    case 'bigint':
      return fail(path, 'BigInt is not JSON (convert it to a string)');
    case 'function':
    case 'symbol':
      return fail(path, `${typeof value} is not JSON`);
  }
  if (value === null) return 'null';
  const obj = value as object;
  if (seen.has(obj)) fail(path, 'cyclic reference');
  if (Array.isArray(obj)) {
    seen.add(obj);
    let out = '[';
    for (let i = 0; i < obj.length; i++) {
      if (i > 0) out += ',';
      out += write(obj[i], `${path}[${i}]`, seen);
    }
    seen.delete(obj);
    return `${out}]`;
  }
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    seen.add(obj);
    const out = write(toJSON.call(obj), path, seen);
    seen.delete(obj);
    return out;
  }
  const proto = Object.getPrototypeOf(obj);
  if (proto !== Object.prototype && proto !== null) {
    fail(path, `${proto?.constructor?.name ?? 'object'} instance is not plain JSON`);
  }
  seen.add(obj);
  const keys = Object.keys(obj).sort();
  let out = '{';
  let first = true;
  for (const k of keys) {
    const v = (obj as Record<string, unknown>)[k];
    // Like JSON: an absent optional property (undefined) is left out rather than refused.
    if (v === undefined) continue;
    if (!k.isWellFormed()) fail(`${path}.${k}`, 'property name contains a lone surrogate');
    if (!first) out += ',';
    first = false;
    out += `${JSON.stringify(k)}:${write(v, `${path}.${k}`, seen)}`;
  }
  seen.delete(obj);
  return `${out}}`;
}

function fail(path: string, reason: string): never {
  throw new SerializationError({ path, reason });
}
