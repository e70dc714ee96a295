/** The one JSON object a bench prints as the last line of stdout (what scripts and the README read). */
export function jsonLine(bench: string, figures: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench, ...figures }));
}
