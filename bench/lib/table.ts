/**
 * Prints a table of text cells to stdout: a header, a rule, the rows; columns padded to their
 * widest cell. The first column is left-aligned (a label) unless `allRight`, the others right-aligned.
 */
export function printTable(header: string[], rows: string[][], options: { allRight?: boolean } = {}): void {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => (row[c] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, c) => (c === 0 && !options.allRight ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
}
