import { userInfo } from 'node:os';

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
