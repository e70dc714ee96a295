import { unconfuse } from './confusables.js';

const MARKS = /\p{M}/gu;
const NON_ASCII = /[\u0080-\uffff]/g;

/**
 * A name's letters as they look, not as they are encoded: compatibility forms folded (NFKD:
 * full-width `ｐａｓｓ` is `pass`, `ﬁ` is `fi`), accents dropped (`contraseña`), Cyrillic and
 * Greek look-alikes mapped to Latin (`pаssword` with a Cyrillic `а`). Case and separators stay.
 */
export function foldName(name: string): string {
  return name.normalize('NFKD').replace(MARKS, '').replace(NON_ASCII, unconfuse);
}

/** A lower-case letter or digit followed by an upper-case letter: a camelCase boundary. */
const CAMEL = /([a-z0-9])([A-Z])/g;
/** `APIKey` → `API Key`: the last capital of a capital run starts the next word. */
const ACRONYM = /([A-Z]+)([A-Z][a-z])/g;
const SEPARATORS = /[^A-Za-z0-9]+/;

/**
 * The words of a field name, folded and in lower case: `userPassword` → `user password`,
 * `X-API-Key` → `x api key`, `credentials_used` → `credentials used`. Names are bounded by the
 * caller, so this is cheap.
 *
 * @example nameComponents('x-apiKey') // ['x', 'api', 'key']
 */
export function nameComponents(name: string): string[] {
  const folded = foldName(name).replace(ACRONYM, '$1 $2').replace(CAMEL, '$1 $2');
  return folded
    .toLowerCase()
    .split(SEPARATORS)
    .filter((w) => w.length > 0);
}
