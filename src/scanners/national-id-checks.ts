/**
 * Check digits of national identifiers. Each takes the compact form (digits and letters only,
 * upper case) and says whether it is well-formed and its check digit or letter is right.
 */

function digitAt(s: string, i: number): number {
  return s.charCodeAt(i) - 48;
}

/** Luhn (mod 10), as used by Canadian SINs and Swedish personnummer. */
export function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = digits.length - 1, double = false; i >= 0; i--, double = !double) {
    let x = digitAt(digits, i);
    if (double) {
      x *= 2;
      if (x > 9) x -= 9;
    }
    sum += x;
  }
  return sum % 10 === 0;
}

/** A calendar date (month 1-12, day within the month; leap years by the Gregorian rule). */
export function validDate(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  const days = [
    31,
    year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28,
    31,
    30,
    31,
    30,
    31,
    31,
    30,
    31,
    30,
    31,
  ];
  return day <= days[month - 1]!;
}

/** US SSN: area not 000, 666 or 9xx; group not 00; serial not 0000 (there is no check digit). */
export function usSsn(d: string): boolean {
  const area = Number(d.slice(0, 3));
  return area !== 0 && area !== 666 && area < 900 && d.slice(3, 5) !== '00' && d.slice(5) !== '0000';
}

const NINO_BAD_PREFIX = new Set(['BG', 'GB', 'NK', 'KN', 'TN', 'NT', 'ZZ']);

/** UK National Insurance number: two letters (not D F I Q U V, second not O), six digits, A-D. */
export function ukNino(s: string): boolean {
  return /^[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z][0-9]{6}[A-D]$/.test(s) && !NINO_BAD_PREFIX.has(s.slice(0, 2));
}

const DNI_LETTERS = 'TRWAGMYFPDXBNJZSQVHLCKE';

/** Spanish DNI (8 digits and a letter) and NIE (X, Y or Z, 7 digits, letter): the letter is the number mod 23. */
export function spanishId(s: string): boolean {
  const m = /^([XYZ]?)([0-9]{7,8})([A-Z])$/.exec(s);
  if (!m) return false;
  const [, prefix = '', digits = '', letter = ''] = m;
  if (prefix === '' ? digits.length !== 8 : digits.length !== 7) return false;
  const n = Number(`${prefix === '' ? '' : 'XYZ'.indexOf(prefix)}${digits}`);
  return DNI_LETTERS[n % 23] === letter;
}

const CF_ODD: Record<string, number> = Object.fromEntries(
  '0:1 1:0 2:5 3:7 4:9 5:13 6:15 7:17 8:19 9:21 A:1 B:0 C:5 D:7 E:9 F:13 G:15 H:17 I:19 J:21 K:2 L:4 M:18 N:20 O:11 P:3 Q:6 R:8 S:12 T:14 U:16 V:10 W:22 X:25 Y:24 Z:23'
    .split(' ')
    .map((e) => [e.slice(0, 1), Number(e.slice(2))]),
);

/** Italian codice fiscale: 16 characters; the last is a check letter over odd and even positions. */
export function italianCodiceFiscale(s: string): boolean {
  if (!/^[A-Z]{6}[0-9LMNP-V]{2}[ABCDEHLMPRST][0-9LMNP-V]{2}[A-Z][0-9LMNP-V]{3}[A-Z]$/.test(s)) return false;
  let sum = 0;
  for (let i = 0; i < 15; i++) {
    const c = s.charAt(i);
    if (i % 2 === 0) sum += CF_ODD[c]!;
    else sum += c >= '0' && c <= '9' ? digitAt(c, 0) : c.charCodeAt(0) - 65;
  }
  return String.fromCharCode(65 + (sum % 26)) === s.charAt(15);
}

/** French NIR (INSEE number): 13 characters (2A/2B for Corsica) and a key, 97 − (number mod 97). */
export function frenchNir(s: string): boolean {
  if (!/^[12][0-9]{2}(?:0[1-9]|1[0-2]|[2-9][0-9])(?:[0-9]{2}|2A|2B)[0-9]{8}$/.test(s)) return false;
  const body = s.slice(0, 13).replace('2A', '19').replace('2B', '18');
  const n = BigInt(body);
  return 97n - (n % 97n) === BigInt(s.slice(13));
}

/** German Steuer-ID: 11 digits, no leading 0, one digit repeated in the first ten, ISO 7064 MOD 11,10. */
export function germanTaxId(d: string): boolean {
  if (d.length !== 11 || d.charAt(0) === '0') return false;
  const counts = new Array<number>(10).fill(0);
  for (let i = 0; i < 10; i++) counts[digitAt(d, i)]!++;
  const repeated = counts.filter((c) => c > 1);
  if (repeated.length !== 1 || repeated[0]! > 3) return false;
  let product = 10;
  for (let i = 0; i < 10; i++) {
    let sum = (digitAt(d, i) + product) % 10;
    if (sum === 0) sum = 10;
    product = (sum * 2) % 11;
  }
  const check = (11 - product) % 10;
  return check === digitAt(d, 10);
}

/** Dutch BSN: 9 digits passing the 11-proef (weights 9…2, and −1 for the last). */
export function dutchBsn(d: string): boolean {
  if (d.length !== 9) return false;
  let sum = 0;
  for (let i = 0; i < 8; i++) sum += (9 - i) * digitAt(d, i);
  sum -= digitAt(d, 8);
  return sum !== 0 && sum % 11 === 0;
}

/** Verhoeff's multiplication table (the dihedral group D5), one row a string. */
const VERHOEFF_D = [
  '0123456789 1234067895 2340178956 3401289567 4012395678',
  '5987604321 6598710432 7659821043 8765932104 9876543210',
]
  .join(' ')
  .split(' ')
  .map((row) => [...row].map(Number));

/** Verhoeff's position table: row i is the permutation 1576283094 applied i times. */
const VERHOEFF_P = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]];
for (let i = 1; i < 8; i++) VERHOEFF_P.push(VERHOEFF_P[i - 1]!.map((x) => [1, 5, 7, 6, 2, 8, 3, 0, 9, 4][x]!));

/** Verhoeff check over a digit string (the last digit is the check digit). */
export function verhoeff(d: string): boolean {
  let c = 0;
  for (let i = 0; i < d.length; i++) c = VERHOEFF_D[c]![VERHOEFF_P[i % 8]![digitAt(d, d.length - 1 - i)]!]!;
  return c === 0;
}

/** Indian Aadhaar: 12 digits, the first 2-9, Verhoeff check. */
export function indianAadhaar(d: string): boolean {
  return d.length === 12 && d.charAt(0) >= '2' && verhoeff(d);
}

/** Brazilian CPF: 11 digits with two mod-11 check digits; one digit repeated is invalid. */
export function brazilianCpf(d: string): boolean {
  if (d.length !== 11 || /^(\d)\1{10}$/.test(d)) return false;
  for (const n of [9, 10]) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += digitAt(d, i) * (n + 1 - i);
    const check = ((sum * 10) % 11) % 10;
    if (check !== digitAt(d, n)) return false;
  }
  return true;
}

/** Canadian SIN: 9 digits, Luhn, not starting with 0 or 8. */
export function canadianSin(d: string): boolean {
  return d.length === 9 && d.charAt(0) !== '0' && d.charAt(0) !== '8' && luhn(d);
}

const CN_WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];

/** Chinese resident identity number: 17 digits (with a valid birth date) and an ISO 7064 MOD 11-2 check (0-9 or X). */
export function chineseResidentId(s: string): boolean {
  if (!/^[1-9][0-9]{16}[0-9X]$/.test(s)) return false;
  if (!validDate(Number(s.slice(6, 10)), Number(s.slice(10, 12)), Number(s.slice(12, 14)))) return false;
  let sum = 0;
  for (let i = 0; i < 17; i++) sum += digitAt(s, i) * CN_WEIGHTS[i]!;
  return '10X98765432'.charAt(sum % 11) === s.charAt(17);
}

const HETU_CHECK = '0123456789ABCDEFHJKLMNPRSTUVWXY';

/** Finnish henkilötunnus: DDMMYY, a century sign, three digits and a mod-31 check character. */
export function finnishHetu(s: string): boolean {
  const m = /^([0-9]{6})[-+A-FU-Y]([0-9]{3})([0-9A-Y])$/.exec(s);
  if (!m) return false;
  const [, date = '', serial = '', check = ''] = m;
  if (!validDate(2000, Number(date.slice(2, 4)), Number(date.slice(0, 2)))) return false;
  return HETU_CHECK.charAt(Number(date + serial) % 31) === check;
}

/** Swedish personnummer: YYMMDD (or YYYYMMDD), a `-` or `+`, four digits; Luhn over the last ten. */
export function swedishPersonnummer(d: string): boolean {
  const ten = d.length === 12 ? d.slice(2) : d;
  if (ten.length !== 10) return false;
  const day = Number(ten.slice(4, 6));
  // Co-ordination numbers add 60 to the day.
  if (!validDate(2000, Number(ten.slice(2, 4)), day > 60 ? day - 60 : day)) return false;
  return luhn(ten);
}

const PESEL_WEIGHTS = [1, 3, 7, 9, 1, 3, 7, 9, 1, 3];

/** Polish PESEL: 11 digits, a birth date (the century in the month), weighted check digit. */
export function polishPesel(d: string): boolean {
  if (d.length !== 11) return false;
  const month = Number(d.slice(2, 4)) % 20;
  if (!validDate(2000, month, Number(d.slice(4, 6)))) return false;
  let sum = 0;
  for (let i = 0; i < 10; i++) sum += digitAt(d, i) * PESEL_WEIGHTS[i]!;
  return (10 - (sum % 10)) % 10 === digitAt(d, 10);
}

/**
 * Belgian national register number: 11 digits, 97 − (first nine mod 97), with a `2` prefix after
 * 2000. Only its printed form (`85.07.30-033.28`) is taken: bare, too many 11-digit numbers pass.
 */
export function belgianNationalNumber(d: string): boolean {
  if (d.length !== 11) return false;
  const body = Number(d.slice(0, 9));
  const check = Number(d.slice(9));
  return 97 - (body % 97) === check || 97 - ((2_000_000_000 + body) % 97) === check;
}
