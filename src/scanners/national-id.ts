import {
  belgianNationalNumber,
  brazilianCpf,
  canadianSin,
  chineseResidentId,
  dutchBsn,
  finnishHetu,
  frenchNir,
  germanTaxId,
  indianAadhaar,
  italianCodiceFiscale,
  polishPesel,
  spanishId,
  swedishPersonnummer,
  ukNino,
  usSsn,
} from './national-id-checks.js';
import { replaceMatches } from './replace-matches.js';
import { type HitSink, marker, type Scanner } from './scanner.js';
import { alnumRun, digitRun, F_SPACE, pureDigitRun } from './text-features.js';

/** One format: a bounded candidate pattern, a check, and what the text's features must show. */
type Detector = {
  re: RegExp;
  valid: (compact: string, candidate: string) => boolean;
  /** A test on the text's features (plain integer comparisons) before the pattern runs. */
  gate: (features: number) => boolean;
};

const NOT_ALNUM = /[^A-Za-z0-9]/g;

/** Digit groups (`123-45-6789`, `046 454 286`, `123.456.789-09`) decided by their layout and count. */
function digitGroups(compact: string, candidate: string): boolean {
  const layout = candidate.replace(/[0-9]+/g, (g) => String(g.length));
  switch (compact.length) {
    case 9:
      if (/^3[- .]2[- .]4$/.test(layout)) return usSsn(compact);
      if (/^3([- ])3\1(?:3)$/.test(layout) && canadianSin(compact)) return true;
      return (layout === '9' || layout === '4.2.3') && dutchBsn(compact);
    case 11:
      if (/^2\.2\.2-3\.2$/.test(layout)) return belgianNationalNumber(compact);
      if (layout === '3.3.3-2') return brazilianCpf(compact);
      if (layout === '11') return brazilianCpf(compact) || germanTaxId(compact) || polishPesel(compact);
      return layout === '2 3 3 3' && germanTaxId(compact);
    case 12:
      return (layout === '12' || /^4([ -])4\1(?:4)$/.test(layout)) && indianAadhaar(compact);
    default:
      return false;
  }
}

/** Formats with letters next to digits, tried on one candidate (a HETU and a personnummer can look alike). */
function lettered(compact: string, candidate: string): boolean {
  const upper = candidate.toUpperCase();
  return (
    ukNino(compact) || spanishId(compact) || finnishHetu(upper) || swedishPersonnummer(compact) || frenchNir(compact)
  );
}

/** Digit-only formats of fixed length; a candidate of 9 to 12 digits is judged by its groups. */
function digitsOnly(compact: string, candidate: string): boolean {
  if (compact.length === 18) return chineseResidentId(compact);
  if (compact.length === 15) return frenchNir(compact);
  return digitGroups(compact, candidate);
}

/**
 * Every pattern starts only at the beginning of a run (look-behind) and is a fixed sequence of
 * bounded parts, so each start costs a bounded number of steps. Formats are grouped into few
 * patterns (one search each) and told apart in code.
 */
const DETECTORS: readonly Detector[] = [
  {
    // UK NINO (compact or in pairs), Spanish DNI/NIE, Finnish HETU, Swedish personnummer, and a
    // French NIR born in Corsica (2A/2B in the middle).
    re: /(?<![A-Za-z0-9_+-])(?:[12] ?[0-9]{2} ?[0-9]{2} ?2[ABab] ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}|[A-Za-z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-Da-d]|(?:[XYZxyz][- ]?)?[0-9]{7,8}[- ]?[A-Za-z]|[0-9]{6}[-+A-FU-Ya-fu-y][0-9]{3}[0-9A-Ya-y]|(?:[0-9]{2})?[0-9]{6}[-+][0-9]{4})(?![A-Za-z0-9_]|-[0-9])/g,
    valid: lettered,
    gate: (f) => pureDigitRun(f) >= 6 || (digitRun(f) >= 6 && (f & F_SPACE) !== 0),
  },
  {
    // Chinese resident id (18, the last may be X), French NIR (15, spaced or not, Corsica 2A/2B),
    // and digit groups: SSN, SIN, BSN, CPF, Steuer-ID, PESEL, Belgian number, Aadhaar.
    re: /(?<![\w.,/+-]|[0-9][ .-])(?:[1-9][0-9]{16}[0-9Xx]|[12] ?[0-9]{2} ?[0-9]{2} ?(?:[0-9]{2}|2[ABab]) ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}|[0-9](?:[ .-]?[0-9]){8,11})(?![\w]|[ .-][0-9])/g,
    valid: digitsOnly,
    gate: (f) => digitRun(f) >= 9,
  },
  {
    // Italian codice fiscale.
    re: /(?<![A-Za-z0-9])[A-Za-z]{6}[0-9LMNP-Vlmnp-v]{2}[A-Za-z][0-9LMNP-Vlmnp-v]{2}[A-Za-z][0-9LMNP-Vlmnp-v]{3}[A-Za-z](?![A-Za-z0-9])/g,
    valid: italianCodiceFiscale,
    gate: (f) => alnumRun(f) >= 16,
  },
];

function scanWith(d: Detector, text: string, sink: HitSink): string {
  return replaceMatches(d.re, text, ([m]) => {
    const compact = m.replace(NOT_ALNUM, '').toUpperCase();
    if (!d.valid(compact, m)) return m;
    sink.hit('national_id');
    return marker('national_id');
  });
}

/**
 * National identifiers of several countries, checked by their check digit or letter where they
 * have one (US SSN has none and is taken only in its dashed form): US SSN, UK NINO, Spanish
 * DNI/NIE, Italian codice fiscale, French NIR, German Steuer-ID, Dutch BSN, Indian Aadhaar,
 * Brazilian CPF, Canadian SIN, Chinese resident id, Finnish HETU, Swedish personnummer, Polish
 * PESEL, Belgian national number. Upper or lower case.
 */
export const nationalIdScanner: Scanner = {
  id: 'national_id',
  allOf: 0,
  anyOf: 0,
  minLength: 9,
  minDigits: 6,
  minRun: 0,
  minAlnum: 0,
  scan(text, sink, features) {
    let out = text;
    for (const d of DETECTORS) if (d.gate(features)) out = scanWith(d, out, sink);
    return out;
  },
};
