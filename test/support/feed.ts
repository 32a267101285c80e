import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../../src/adapters/database.js';
import type { Config } from '../../src/config.js';
import { CursorSeal } from '../../src/domain/events/cursor-seal.js';
import type { FeedPosition } from '../../src/domain/events/feed-cursor.js';
import { FEED_HORIZON_SQL } from '../../src/domain/events/feed.js';

/**
 * Waits until every committed feed row is below the horizon, so a reader that stops at the first
 * empty page has seen them all. On PostgreSQL the horizon is the server's: a transaction another
 * test file holds open holds this file's readers back too (docs/EVENTS.md).
 */
export async function feedCaughtUp(sql: Sql, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await sql.query<{ held: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM event_feed WHERE xact >= ${FEED_HORIZON_SQL}) AS held`,
    );
    if (rows[0]?.held !== true) return;
    if (Date.now() > deadline) throw new Error('the feed stayed held back by an open transaction');
    await sleep(10);
  }
}

/** The cursors an app under test hands out, sealed and opened as its edges do (docs/rules.md R63). */
export function feedCursors(t: { readonly config: Config }, serviceId = 'wallet-api') {
  const seal = new CursorSeal(t.config.cursorSealSecret);
  return {
    seal: (position: FeedPosition) => seal.seal(serviceId, position),
    /** The position of a cursor the app handed `serviceId`; throws for any other text. */
    open: (text: string): FeedPosition => {
      const position = seal.open(serviceId, text);
      if (position === null) throw new Error(`not a cursor sealed for ${serviceId}: ${text}`);
      return position;
    },
  };
}
