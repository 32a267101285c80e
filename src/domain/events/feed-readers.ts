import type { Sql } from '../../adapters/database.js';

/**
 * Where a background reader of the whole feed stands (the NATS publisher): the seq of the last
 * event it finished with. Stored only after the work is done, so a crash repeats work, never
 * skips it; a stored position never moves back.
 */
export async function loadReaderPosition(sql: Sql, reader: string): Promise<bigint | null> {
  const { rows } = await sql.query<{ after_seq: bigint }>('SELECT after_seq FROM event_feed_readers WHERE reader = $1', [reader]);
  return rows[0]?.after_seq ?? null;
}

export async function storeReaderPosition(sql: Sql, reader: string, afterSeq: bigint): Promise<void> {
  await sql.query(
    `INSERT INTO event_feed_readers (reader, after_seq) VALUES ($1, $2)
     ON CONFLICT (reader) DO UPDATE SET after_seq = greatest(event_feed_readers.after_seq, excluded.after_seq), updated_at = now()`,
    [reader, afterSeq.toString()],
  );
}
