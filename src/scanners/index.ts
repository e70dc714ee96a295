/**
 * The value scanners as the rest of the library sees them: the {@link ValueScanner} a redaction
 * policy scans every string with (the built-in one, a policy's, or one that replaces it), the
 * scanner ids a policy names, and the few pieces the policy shares with the scanners (the
 * secret-name word lists, name folding, the card check of whole numbers, the e-mail mask).
 * Nothing else of this folder is imported from outside it (see README.md).
 */
export { cardMarker, isCardNumber } from './card-number.js';
export type { CustomScannerInput } from './custom-scanner.js';
export { maskEmail } from './email.js';
export { foldName } from './name-components.js';
export { scannedLogger } from './scanned-logger.js';
export { type HitSink, SCANNER_IDS, type ScannerId } from './scanner.js';
export { type SecretNameKind, secretNameKind } from './secret-words.js';
export {
  DEFAULT_VALUE_SCANNER,
  type PolicyScanner,
  policyScanner,
  REPLACED_SCANNER_ID,
  type ValueScanner,
} from './value-scanner.js';
