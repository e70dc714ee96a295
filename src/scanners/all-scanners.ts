import { authHeaderScanner } from './auth-header.js';
import { cardScanner } from './card-number.js';
import { emailScanner } from './email.js';
import { highEntropyScanner } from './high-entropy.js';
import { ibanScanner } from './iban.js';
import { jwtScanner } from './jwt.js';
import { nationalIdScanner } from './national-id.js';
import { phoneScanner } from './phone.js';
import { privateKeyScanner } from './private-key.js';
import { providerTokenScanner } from './provider-tokens.js';
import type { Scanner } from './scanner.js';
import { secretPairScanner } from './secret-pair.js';
import { urlCredentialsScanner } from './url-credentials.js';

/**
 * Every built-in scanner, in the order they run. Order matters: a private key or a JWT is
 * removed whole before anything looks inside it; a provider token is named (`scan.stripe_key`)
 * before the generic `name=value` scanner sees its marker and leaves it; headers and pairs go
 * before the entropy scanner so that their findings keep a precise name; cards and IBANs go
 * before national ids and phones, whose looser shapes could otherwise take part of them; the
 * entropy scanner goes last and takes whatever random-looking run is left.
 */
export const ALL_SCANNERS: readonly Scanner[] = [
  privateKeyScanner,
  jwtScanner,
  providerTokenScanner,
  urlCredentialsScanner,
  authHeaderScanner,
  secretPairScanner,
  emailScanner,
  cardScanner,
  ibanScanner,
  nationalIdScanner,
  phoneScanner,
  highEntropyScanner,
];
