import { AUDIT_JOB_NAME, decodeAuditBatch } from '../../src/audit/batch-codec.js';
import type { TestContext } from './context.js';

/** Every row of every table of the file's schema, as text: what anyone with database access reads. */
export async function dumpPostgres(t: TestContext): Promise<string> {
  const tables = await t.query(`select table_name from information_schema.tables where table_schema = $1`, [t.schema]);
  let text = '';
  for (const { table_name } of tables.rows) {
    const rows = await t.query(`select t::text as row from ${t.schema}.${table_name} t`);
    text += `${rows.rows.map((r) => r.row).join('\n')}\n`;
  }
  return text;
}

/**
 * Every key under the file's BullMQ prefix, whatever its type, as text; audit batches (stored
 * deflated) decoded, as anyone with Redis access could.
 */
export async function dumpRedis(t: TestContext): Promise<string> {
  const redis = t.redis();
  try {
    let text = '';
    for (const key of await redis.keys(`${t.prefix}*`)) {
      const type = await redis.type(key);
      if (type === 'string') text += await redis.get(key);
      else if (type === 'hash') {
        const hash = await redis.hgetall(key);
        text += JSON.stringify(hash);
        if (hash.name === AUDIT_JOB_NAME) text += JSON.stringify(await decodeAuditBatch(JSON.parse(hash.data ?? '')));
      } else if (type === 'list') text += JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === 'zset') text += JSON.stringify(await redis.zrange(key, 0, -1));
      else if (type === 'set') text += JSON.stringify(await redis.smembers(key));
      else if (type === 'stream') text += JSON.stringify(await redis.xrange(key, '-', '+'));
      text += '\n';
    }
    return text;
  } finally {
    await redis.quit();
  }
}

/**
 * The forms a secret can take in stored text: raw, lower-case, JSON-escaped, URL-, base64- and
 * hex-encoded (each long enough to be the secret, not a common fragment).
 */
export function encodedForms(secret: string): string[] {
  const bytes = Buffer.from(secret);
  const forms = [
    secret,
    secret.toLowerCase(),
    JSON.stringify(secret).slice(1, -1),
    encodeURIComponent(secret),
    bytes.toString('base64').replace(/=+$/, ''),
    bytes.toString('base64url'),
    bytes.toString('hex'),
  ];
  // Inside a larger base64 text the secret's encoding depends on its offset: all three, trimmed.
  if (bytes.length >= 12) {
    for (const pad of [1, 2]) {
      const b64 = Buffer.concat([Buffer.alloc(pad), bytes]).toString('base64');
      forms.push(b64.slice(4, -4), b64.replace(/\+/g, '-').replace(/\//g, '_').slice(4, -4));
    }
  }
  return [...new Set(forms)];
}

/** The secrets of `secrets` that appear in `text` in any of their encoded forms. */
export function plaintextFound(text: string, secrets: readonly string[]): string[] {
  const lower = text.toLowerCase();
  return secrets.filter((s) => encodedForms(s).some((f) => text.includes(f) || lower.includes(f.toLowerCase())));
}
