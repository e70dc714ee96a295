import { type Command, Option } from 'commander';
import { IdempotencyConfigError } from '../../errors/errors.js';
import { newOperatorToken } from '../../shared/operators.js';
import { CliError, EXIT } from '../errors.js';
import { toJson } from '../format.js';

type TokenOptions = { actor: string; namespaces: string; json?: boolean };

/**
 * `operators token`: a new operator token for the confirmation endpoint, printed once, and the
 * `BQI_OPERATORS` entry that holds only its SHA-256. Needs no database: the token is configured,
 * not stored.
 */
export function operatorsTokenCommand(opts: TokenOptions, out: (text: string) => void): void {
  let made: ReturnType<typeof newOperatorToken>;
  try {
    made = newOperatorToken({ actor: opts.actor.trim(), namespaces: opts.namespaces.split(',').map((n) => n.trim()) });
  } catch (err) {
    if (err instanceof IdempotencyConfigError) {
      throw new CliError(EXIT.usage, err.message.replace(/^BQI_OPERATORS: operator: /, ''));
    }
    throw err;
  }
  const { token, entry, operator } = made;
  if (opts.json) {
    out(toJson({ token, entry, ...operator }));
    return;
  }
  out(
    [
      `token for ${operator.actor} (shown once, not stored anywhere: hand it over now):`,
      `  ${token}`,
      'add this entry to BQI_OPERATORS (entries separated by white space) and restart the operations process:',
      `  ${entry}`,
    ].join('\n'),
  );
}

/** Registers `operators token` on the CLI. */
export function registerOperatorCommands(program: Command, out: (text: string) => void): void {
  program
    .command('operators')
    .description('operators of the confirmation endpoint: who answers, for which namespaces, by which token')
    .command('token')
    .description('make an operator token: printed once; configure only the BQI_OPERATORS entry (its SHA-256)')
    .addOption(new Option('--actor <id>', 'the actor the answers are recorded under').makeOptionMandatory())
    .addOption(
      new Option(
        '--namespaces <list>',
        'comma-separated key namespaces it may answer: exact, a prefix ending in * (acme/payments.*), or * for all',
      ).makeOptionMandatory(),
    )
    .addOption(new Option('--json', 'machine-readable output'))
    .addHelpText(
      'after',
      `
Revoke a token by removing its entry (and restarting); rotate by adding the new entry next to
the old one, handing the new token over, then removing the old entry.

Example:
  $ bullmq-idempotency operators token --actor alice --namespaces 'acme/payments.*'`,
    )
    .action((opts: TokenOptions) => operatorsTokenCommand(opts, out));
}
