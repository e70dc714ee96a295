import { wordSet } from '../shared/word-set.js';
import { nameComponents } from './name-components.js';

/** How strongly a name says that its value is a secret. */
export type SecretNameKind = 'strong' | 'weak';

/**
 * Words that make any value under them a secret (`password: correct horse`). Matched as whole
 * words of the name, and, for the long ones, anywhere in a word (`userpassword`, `dbpasswd`).
 */
const STRONG_WORDS = wordSet(`
  password passwords passwd passphrase pass pwd pw secret secrets credential credentials creds cred
  authorization cookie cookies signature sig passwort kennwort contrasena senha wachtwoord motdepasse
`);
const STRONG_INFIXES = ['password', 'passwd', 'passphrase', 'credential', 'authorization', 'secretkey', 'privatekey'];

/**
 * Words whose value is a secret when it also looks like one (`token: 8f3k…`, but not
 * `auth: required`). As field names they are secrets outright: a field holds one value.
 */
const WEAK_WORDS = wordSet(`
  token apikey accesskey auth authtoken bearer jwt session sessionid sid otp totp csrf xsrf nonce salt
  pin cvv cvc privatekey secretkey
`);
const WEAK_INFIXES = ['apikey', 'accesskey', 'accesstoken', 'refreshtoken', 'authtoken', 'sessionid', 'sessiontoken'];

/** `<qualifier> key` is a key in the cryptographic sense; `key` alone (a cache or operation key) is not. */
const KEY_QUALIFIERS = wordSet(`
  api access secret private signing encryption master ssh hmac license client app webhook auth account
  storage subscription service aes rsa gpg pgp decryption shared session
`);

/**
 * A last word that makes the name describe the secret rather than hold it: `token_type`,
 * `passwordLength`, `secretName`, `cookiePolicy`, `apiKeyId`.
 */
const METADATA_WORDS = wordSet(`
  name names type types kind count counts length len size ttl expiry expires expired expiration at in
  version ref refs arn id ids url uri path file policy policies usage hint limit max min required less
  mode method provider scheme status state error errors reason level scope scopes format source header
  prefix enabled disabled changed reset rotated strength rules pattern regex age valid invalid missing
  present location index label description endpoint consent
`);

/**
 * Whether a field or parameter name says that its value is a secret, judged word by word (see
 * {@link nameComponents}): `userPassword`, `password_field`, `credentialsUsed`, `x-api-key`,
 * `STRIPE_API_KEY`, `pаssword` (Cyrillic `а`). A last word like `type` or `length` makes it
 * metadata (`token_type`); plural `tokens` is a count (`maxTokens`).
 *
 * @example secretNameKind('x-api-key') // 'weak'
 */
export function secretNameKind(name: string): SecretNameKind | undefined {
  const known = CACHE.get(name);
  if (known !== undefined) return known === 'none' ? undefined : known;
  const kind = judge(name);
  if (CACHE.size >= MAX_CACHED) CACHE.clear();
  CACHE.set(name, kind ?? 'none');
  return kind;
}

/** Names repeat (the same keys in every event, the same `password=` in every log line). */
const CACHE = new Map<string, SecretNameKind | 'none'>();
const MAX_CACHED = 4096;

function judge(name: string): SecretNameKind | undefined {
  const words = nameComponents(name);
  const n = words.length;
  if (n === 0 || n > 12) return undefined;
  if (n > 1 && METADATA_WORDS.has(words[n - 1]!)) return undefined;
  let weak = false;
  for (let i = 0; i < n; i++) {
    const w = words[i]!;
    if (STRONG_WORDS.has(w) || w.endsWith('secret') || w.endsWith('secrets')) return 'strong';
    for (const infix of STRONG_INFIXES) if (w.includes(infix)) return 'strong';
    if (WEAK_WORDS.has(w)) weak = true;
    else if (w === 'key' && i > 0 && KEY_QUALIFIERS.has(words[i - 1]!)) weak = true;
    else if (w.length > 6 && (w.endsWith('token') || WEAK_INFIXES.some((infix) => w.includes(infix)))) weak = true;
  }
  return weak ? 'weak' : undefined;
}
