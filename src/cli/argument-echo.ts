import type { Command } from 'commander';

/** What stands in a usage error for a value the operator typed. */
export const NOT_ECHOED = '<not echoed>';

/** Every spelling of a command or an option the program defines (its own words, safe to name back). */
function programWords(program: Command): Set<string> {
  const words = new Set<string>();
  const visit = (cmd: Command) => {
    words.add(cmd.name());
    for (const alias of cmd.aliases()) words.add(alias);
    for (const opt of cmd.options) {
      if (opt.long) words.add(opt.long);
      if (opt.short) words.add(opt.short);
    }
    for (const sub of cmd.commands) visit(sub);
  };
  visit(program);
  words.add('--help');
  words.add('-h');
  return words;
}

/**
 * Commander's usage error without the values typed on the command line. Commander quotes what
 * it refuses (`option '--actor <id>' argument '<value>' is invalid`, `unknown option '<arg>'`,
 * `unknown command '<arg>'`), and what it refuses is often a secret pasted in the wrong place: a
 * token given as `--actor`, a `--password=…` flag the command does not have. stderr is often
 * logged, so every argument given to `parse` that is not one of the program's own command or option
 * names is replaced, wherever commander quoted it, by {@link NOT_ECHOED}; and any such argument of
 * 8 characters or more, wherever it still appears. Nothing here looks at what a value is like:
 * a value is never echoed, whatever its form. The program's own names (the option's flags, the
 * "Did you mean --actor?" hint) stay.
 */
export function withoutArgumentValues(message: string, program: Command): string {
  const words = programWords(program);
  // `rawArgs`: what parse() was given (set by commander, not in its types); else this process's.
  const raw = (program as { rawArgs?: unknown }).rawArgs;
  const args: string[] = Array.isArray(raw) && raw.length > 0 ? raw.map(String) : process.argv;
  const values = [...new Set(args)]
    .filter((arg) => arg.length > 0 && !words.has(arg))
    .sort((a, b) => b.length - a.length);
  let out = message;
  for (const v of values) out = out.replaceAll(`'${v}'`, `'${NOT_ECHOED}'`);
  for (const v of values) if (v.length >= 8) out = out.replaceAll(v, NOT_ECHOED);
  return out;
}
