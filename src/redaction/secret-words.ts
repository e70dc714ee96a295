/** The secret-name word lists live with the value scanners; the identifier grammar reads them here. */
export { type SecretNameKind, secretNameKind } from '../scanners/index.js';
