import { userInfo } from 'node:os';
import { isIdentifier } from '../audit/identifier-grammar.js';

/** Longest actor id an audit event takes. */
export const MAX_ACTOR_LENGTH = 200;

/** The operator: `--actor`, else the OS user. */
export function defaultActor(): string {
  try {
    return userInfo().username || process.env.USER || 'unknown-operator';
  } catch {
    // No passwd entry (some containers).
    return process.env.USER || process.env.LOGNAME || 'unknown-operator';
  }
}

/** Plain names only: letters and digits with `. _ : -` inside, short segments, no long digit runs. */
const PLAIN_ACTOR = /^[A-Za-z0-9](?:[A-Za-z0-9._:-]{0,62}[A-Za-z0-9])?$/;

/**
 * The actor as the CLI's own output names it: `user:<actor>` for a plain name that the audit trail
 * also keeps in clear (its identifier grammar, as an operator action's actor is stored). Anything
 * else (an e-mail address, a token, a long id) is not echoed: the trail keeps it as a keyed
 * reference, and stdout is often logged. The shape alone is not enough: a random base64url token
 * is letters and digits split by `-` and `_` into short parts, and only the grammar's structure
 * check tells it from a name.
 */
export function actorLabel(actor: string): string {
  const plain =
    PLAIN_ACTOR.test(actor) &&
    !/\d{10}/.test(actor) &&
    actor.split(/[._:-]/).every((part) => part.length <= 24) &&
    isIdentifier(actor, MAX_ACTOR_LENGTH);
  return plain ? `user:${actor}` : 'user (given by --actor, not echoed: not a plain name)';
}
