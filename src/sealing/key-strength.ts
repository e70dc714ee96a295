import { wordSet } from '../shared/word-set.js';

/** Fewest bytes a keyring secret may have: 256 bits. */
export const MIN_SECRET_BYTES = 32;
/** Fewest distinct byte values in a secret; 32 random bytes have about 30. */
const MIN_DISTINCT_BYTES = 12;
/** Fewest bits a secret given as text must be estimated to hold. */
export const MIN_TEXT_SECRET_BITS = 128;
/** What every refusal says to do instead. */
export const GENERATE_HINT =
  'generate one with `openssl rand -base64 32` and give it as base64:… (or hex:… of `openssl rand -hex 32`)';

/**
 * Why a secret is too weak to key the keyring, or undefined when it is fit. Refuses secrets
 * that are short, that use few distinct bytes (`aaaa…`, `0101…`), that repeat a shorter block
 * (`hunter2hunter2…`) or that step by a constant (`0123…`, `abcd…`); a secret given as text
 * (neither `base64:` nor `hex:`) must also be estimated to hold {@link MIN_TEXT_SECRET_BITS}
 * bits ({@link estimateTextBits}): phrases, names, alphabet runs and keyboard walks do not.
 * These catch the keys people type by hand or copy from examples; they cannot prove a key
 * random, and do not try.
 */
export function weakSecretReason(secret: Uint8Array, asText = false): string | undefined {
  const reason = byteReason(secret) ?? (asText ? textReason(Buffer.from(secret).toString('utf8')) : undefined);
  return reason === undefined ? undefined : `${reason}: ${GENERATE_HINT}`;
}

function byteReason(secret: Uint8Array): string | undefined {
  if (secret.length < MIN_SECRET_BYTES) {
    return `is ${secret.length} bytes; at least ${MIN_SECRET_BYTES} are required`;
  }
  const distinct = new Set(secret).size;
  if (distinct < MIN_DISTINCT_BYTES) {
    return `uses only ${distinct} distinct byte values (at least ${MIN_DISTINCT_BYTES})`;
  }
  const period = shortestPeriod(secret);
  if (period <= secret.length / 2) return `repeats a block of ${period} bytes`;
  if (constantStep(secret)) return 'is a sequence with a constant step';
  return undefined;
}

function textReason(text: string): string | undefined {
  const bits = estimateTextBits(text);
  if (bits >= MIN_TEXT_SECRET_BITS) return undefined;
  return (
    `is guessable text (about ${Math.floor(bits)} bits by estimate, ${MIN_TEXT_SECRET_BITS} needed: ` +
    'words, names, alphabet runs, keyboard walks and repeats count for little)'
  );
}

/**
 * Words and names people put in keys, and the commonest English words: each is worth about as
 * much as guessing one word of a list of this order of size, never as much as its letters.
 */
const WORDS = wordSet(`
  key keys secret secrets password passwd pass passphrase token tokens sign signing signature seal
  sealing encrypt encryption crypt crypto cipher hmac aes private public master root admin default
  change changeme me please test testing tests dev devel development prod production staging stage
  local localhost demo example sample dummy fake temp tmp qa uat live sandbox release app apps
  application api service server client backend frontend web worker queue queues job jobs bull
  bullmq redis postgres postgresql database db data idempotency idempotent ledger result results
  company corp corporation inc ltd llc acme org team project main primary secondary backup new old
  my our your the and for with from this that not but all any one two three four five six seven
  eight nine ten first last next super very long strong good best secure security safe admin user
  users account accounts customer customers order orders payment payments billing invoice charge
  cloud aws gcp azure kube kubernetes docker cluster node deploy deployment config settings env
  hello world welcome letmein login logon access auth authentication session cookie shadow dragon
  monkey football baseball soccer hockey sunshine princess qwerty azerty dvorak trustno iloveyou
  love god summer winter spring autumn fall january february march april may june july august
  september october november december monday tuesday wednesday thursday friday saturday sunday
  alpha beta gamma delta omega red blue green black white orange purple yellow silver gold
  correct horse battery staple lorem ipsum dolor sit amet foo bar baz qux quux hunter
  value values what when where which who why how time year day week month today tomorrow
  version v1 v2 v3 k1 k2 k3 abc xyz
`);
const LONGEST_WORD = Math.max(...[...WORDS].map((w) => w.length));
/** Bits of one word: about a 4096-word list, plus its capitalisation. */
const WORD_BITS = 12;

/** Characters that join words (`correct-horse battery_staple`): worth a choice among a few. */
const SEPARATORS: ReadonlySet<string> = new Set([' ', '-', '_', '.', ',', '/', ':', '+']);
const SEPARATOR_BITS = 2;

/** Characters estimated: past these, a text that is not yet strong will not be made so by guesswork. */
const MAX_ESTIMATED_CHARS = 512;

/** Rows of a US keyboard, unshifted and shifted, for walks. */
const KEYBOARD_ROWS = [
  '`1234567890-=',
  'qwertyuiop[]\\',
  "asdfghjkl;'",
  'zxcvbnm,./',
  '~!@#$%^&*()_+',
  'QWERTYUIOP{}|',
  'ASDFGHJKL:"',
  'ZXCVBNM<>?',
];
const KEY_POSITION = new Map<string, [number, number]>();
for (const [r, row] of KEYBOARD_ROWS.entries()) {
  for (const [c, ch] of [...row].entries()) KEY_POSITION.set(ch, [r % 4, c]);
}

/**
 * The bits a text holds by estimate (in the manner of zxcvbn): the cheapest cover of the text by
 * dictionary words, runs (`abcd`, `9876`), keyboard walks (`qwerty`, `asdf`), repeats of an
 * earlier part, and single characters worth log2 of the text's alphabet each. Linear in the text
 * times the longest word; a secret is at most a few hundred characters.
 */
export function estimateTextBits(text: string): number {
  const chars = [...text].slice(0, MAX_ESTIMATED_CHARS);
  const lower = chars.map((c) => c.toLowerCase());
  const n = chars.length;
  const charBits = Math.log2(alphabetSize(text));
  const best = new Float64Array(n + 1).fill(Number.POSITIVE_INFINITY);
  best[0] = 0;
  for (let i = 0; i < n; i++) {
    const here = best[i] as number;
    if (!Number.isFinite(here)) continue;
    const relax = (end: number, bits: number) => {
      if (here + bits < (best[end] as number)) best[end] = here + bits;
    };
    relax(i + 1, SEPARATORS.has(chars[i] as string) ? SEPARATOR_BITS : charBits);
    for (let len = 3; len <= Math.min(LONGEST_WORD, n - i); len++) {
      const word = lower.slice(i, i + len).join('');
      if (WORDS.has(word)) relax(i + len, WORD_BITS + (chars.slice(i, i + len).join('') === word ? 0 : 1));
    }
    const run = runLength(lower, i);
    for (let len = 3; len <= run; len++) relax(i + len, 6 + Math.log2(len));
    const walk = walkLength(chars, i);
    for (let len = 3; len <= walk; len++) relax(i + len, 6 + Math.log2(len) + len / 2);
    const repeat = repeatLength(lower, i);
    if (repeat >= 3) relax(i + repeat, 2 * Math.log2(i + 1) + Math.log2(repeat));
  }
  return best[n] as number;
}

/** Characters from `i` on that step by +1 or -1 each (`abcd`, `4321`). */
function runLength(s: string[], i: number): number {
  if (i + 1 >= s.length) return 1;
  const step = code(s[i + 1]) - code(s[i]);
  if (step !== 1 && step !== -1) return 1;
  let len = 2;
  while (i + len < s.length && code(s[i + len]) - code(s[i + len - 1]) === step) len++;
  return len;
}

function code(c: string | undefined): number {
  return c?.codePointAt(0) ?? 0;
}

/** Characters from `i` on each next to the one before on a keyboard (`qwerty`, `zaq1`). */
function walkLength(s: string[], i: number): number {
  let len = 1;
  while (i + len < s.length && adjacent(s[i + len - 1] as string, s[i + len] as string)) len++;
  return len;
}

function adjacent(a: string, b: string): boolean {
  const pa = KEY_POSITION.get(a);
  const pb = KEY_POSITION.get(b);
  if (!pa || !pb || a === b) return false;
  return Math.abs(pa[0] - pb[0]) <= 1 && Math.abs(pa[1] - pb[1]) <= 1;
}

/** The longest run from `i` that repeats text that began earlier. */
function repeatLength(s: string[], i: number): number {
  let best = 0;
  for (let j = 0; j < i; j++) {
    let len = 0;
    while (i + len < s.length && s[j + len] === s[i + len]) len++;
    if (len > best) best = len;
  }
  return best;
}

/** How many characters a text of this kind draws from: the classes it uses, summed. */
function alphabetSize(text: string): number {
  let size = 0;
  if (/[a-z]/.test(text)) size += 26;
  if (/[A-Z]/.test(text)) size += 26;
  if (/[0-9]/.test(text)) size += 10;
  if (/[^A-Za-z0-9]/.test(text)) size += 33;
  return Math.max(size, 2);
}

/** The shortest p such that s[i] = s[i + p] for all i (Knuth–Morris–Pratt failure function): linear. */
function shortestPeriod(s: Uint8Array): number {
  const fail = new Int32Array(s.length);
  let k = 0;
  for (let i = 1; i < s.length; i++) {
    while (k > 0 && s[i] !== s[k]) k = fail[k - 1] as number;
    if (s[i] === s[k]) k++;
    fail[i] = k;
  }
  return s.length - (fail[s.length - 1] as number);
}

function constantStep(s: Uint8Array): boolean {
  const step = ((s[1] as number) - (s[0] as number) + 256) % 256;
  for (let i = 2; i < s.length; i++) {
    if (((s[i] as number) - (s[i - 1] as number) + 256) % 256 !== step) return false;
  }
  return true;
}
