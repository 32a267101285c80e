/**
 * A feed cursor: the position after one event of the feed (its `seq`), opaque to clients. The
 * format is strict (exactly the bytes `encodeFeedCursor` writes), so a cursor the service did not
 * issue is refused (docs/rules.md R45) instead of being read as some other position.
 */
const CURSOR_PATTERN = /^e([1-9][0-9]{0,17}|0)$/;

export function encodeFeedCursor(seq: bigint): string {
  return Buffer.from(`e${seq}`).toString('base64url');
}

/** The seq a cursor names, or null when the text is not a cursor this service issues. */
export function decodeFeedCursor(text: string): bigint | null {
  const match = CURSOR_PATTERN.exec(Buffer.from(text, 'base64url').toString('latin1'));
  if (match?.[1] === undefined) return null;
  const seq = BigInt(match[1]);
  return encodeFeedCursor(seq) === text ? seq : null;
}
