import type { Sql } from '../../adapters/database.js';
import type { FeedPosition } from './feed-cursor.js';

/**
 * Where a background reader of the whole feed stands (the NATS publisher): the place of the last
 * event it finished with. Stored only after the work is done, so a crash repeats work, never
 * skips it; a stored position never moves back.
 */
export async function loadReaderPosition(sql: Sql, reader: string): Promise<FeedPosition | null> {
  const { rows } = await sql.query<{ after_xact: bigint; after_seq: bigint }>(
    'SELECT after_xact, after_seq FROM event_feed_readers WHERE reader = $1',
    [reader],
  );
  const row = rows[0];
  return row === undefined ? null : { xact: row.after_xact, seq: row.after_seq };
}

export async function storeReaderPosition(sql: Sql, reader: string, after: FeedPosition): Promise<void> {
  await sql.query(
    `INSERT INTO event_feed_readers AS r (reader, after_xact, after_seq) VALUES ($1, $2, $3)
     ON CONFLICT (reader) DO UPDATE SET after_xact = excluded.after_xact, after_seq = excluded.after_seq, updated_at = now()
      WHERE (excluded.after_xact, excluded.after_seq) > (r.after_xact, r.after_seq)`,
    [reader, after.xact.toString(), after.seq.toString()],
  );
}
