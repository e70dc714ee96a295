import { sha256 } from '../fingerprint/sha256.js';
import { packageVersion } from '../shared/package-version.js';
import type { RedactionPolicyInput } from './policy-schema.js';

/**
 * The version of what redaction does with a policy, in the library's code: raise it when a change
 * to the redaction of events (the emitter's or the writer's) would redact an event differently
 * under the same policy, so that a writer of the new code does not take an older emitter's work
 * as its own (see batch-tag.ts). The library's version is part of the fingerprint too: processes
 * of two releases never share one.
 */
const REDACTION_CODE_VERSION = 1;

/**
 * A digest of a policy's definition, as `defineRedactionPolicy` parsed it (defaults applied), and
 * of the library's release: the policy's version, rules, allow-lists, limits, scanners and
 * identifier formats, with regular expressions by their source and flags and functions
 * (identifier predicates, scanners) by their code. The HMAC keys enter by their ids only: their
 * secrets never enter the text. Undefined when the definition cannot be described (a cycle, a
 * depth past 64).
 *
 * What a function closes over is not its code: two predicates of the same text reading different
 * data have the same fingerprint. Policies are the deployment's own code, and a batch tag also
 * needs the policy's secret key (batch-tag.ts).
 */
export function policyFingerprint(parsed: unknown): string | undefined {
  const p = parsed as RedactionPolicyInput;
  try {
    const text = describe(
      { code: REDACTION_CODE_VERSION, library: packageVersion(), ...p, hmacKeys: (p.hmacKeys ?? []).map((k) => k.id) },
      0,
      new Set(),
    );
    return sha256(text, 'base64url');
  } catch {
    return undefined;
  }
}

function describe(v: unknown, depth: number, seen: Set<object>): string {
  if (depth > 64) throw new Error('too deep');
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
    case 'boolean':
      return String(v);
    case 'bigint':
      return `${v}n`;
    case 'undefined':
      return 'u';
    case 'symbol':
      return `s${JSON.stringify(v.description ?? '')}`;
    case 'function':
      return `f${JSON.stringify(Function.prototype.toString.call(v))}`;
  }
  if (v === null) return 'null';
  const o = v as object;
  if (o instanceof RegExp) return `r${JSON.stringify(o.source)}/${o.flags}`;
  if (ArrayBuffer.isView(o)) return 'bytes';
  if (seen.has(o)) throw new Error('cycle');
  seen.add(o);
  let out: string;
  if (Array.isArray(o)) out = `[${o.map((x) => describe(x, depth + 1, seen)).join(',')}]`;
  else {
    const r = o as Record<string, unknown>;
    out = `{${Object.keys(r)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${describe(r[k], depth + 1, seen)}`)
      .join(',')}}`;
  }
  seen.delete(o);
  return out;
}
