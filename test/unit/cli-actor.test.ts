/**
 * The CLI's echo of `--actor`: a plain name is told back (`user:<name>`); a token, an e-mail
 * address or anything the audit trail would keep as a keyed reference is not, since the CLI's
 * stdout is often logged.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isIdentifier } from '../../src/audit/identifier-grammar.js';
import { actorLabel, MAX_ACTOR_LENGTH } from '../../src/cli/actor.js';
import { scannerCorpus } from '../fixtures/scanner-corpus.js';

const echoed = (actor: string) => actorLabel(actor).startsWith('user:');

describe('actorLabel', () => {
  it('tells back a plain name', () => {
    for (const name of ['alice', 'ops.oncall', 'jane_doe', 'worker:host:12', 'j.smith-2', 'svc-billing']) {
      expect(actorLabel(name)).toBe(`user:${name}`);
    }
  });

  it('does not tell back random base64url tokens, which are letters and digits split by - and _', () => {
    // Tokens of this shape were told back before: each part between the separators is short.
    for (const token of [
      'nrOwdnAuLb8pz4BzPX4A--D-B4VS10AJOV-P-6byTMU',
      'UnSA6ii_kAiobprh76vPBkcDrulmruHy',
      '5UZenLtiFmFl6dNwAhsNcg',
      'IfHxWjTZwSTc51EcN9zIAz1Y-Db-30uT1M-eZqz8NycTLbPageZjrw',
    ]) {
      expect(actorLabel(token), token).toBe('user (given by --actor, not echoed: not a plain name)');
    }
    // Fresh draws of the lengths API keys and session tokens have (22 to 64 characters). Before,
    // 10–97 % of each length were told back. The grammar still admits a rare short one, mostly
    // lower-case (5 of 2,000,000 draws at 22 characters, none at 32 or 43): at most 2 of 2,000.
    for (const bytes of [16, 24, 32, 40, 48]) {
      const told: string[] = [];
      for (let i = 0; i < 2_000; i++) {
        const token = randomBytes(bytes).toString('base64url');
        if (echoed(token)) told.push(token);
      }
      expect(told.length, `${bytes}-byte tokens told back: ${told.join(' ')}`).toBeLessThanOrEqual(2);
    }
  });

  it('tells back only what the audit trail keeps in clear, and no secret of a fresh corpus', () => {
    for (let round = 0; round < 20; round++) {
      for (const entry of scannerCorpus()) {
        if (!echoed(entry.text)) continue;
        expect(isIdentifier(entry.text, MAX_ACTOR_LENGTH), entry.id).toBe(true);
        const label = actorLabel(entry.text);
        for (const needle of entry.needles) expect(label.includes(needle), `${entry.id}: ${needle}`).toBe(false);
      }
    }
  });
});
