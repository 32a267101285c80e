import { createCipheriv, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { decodeFeedCursor, type FeedPosition } from './feed-cursor.js';

/**
 * Feed positions as the world outside sees them (docs/rules.md R63): sealed, so that a cursor
 * names no count of anyone's activity and cannot be made up or altered. A position is the
 * database's transaction counter and a sequence; in plain text, two cursors a minute apart told
 * a key how many payments every tenant made in that minute, and a made-up one probed the counter.
 *
 * The seal is deterministic authenticated encryption (the SIV construction, RFC 5297's idea
 * with HMAC-SHA256 and AES-256-CTR): tag = HMAC(macKey, scope, position) cut to 16 bytes, then
 * the position's 16 bytes encrypted under encKey with the tag as counter block. Deterministic on
 * purpose: a webhook's Idempotency-Key and an event bus message id must be the same text on every
 * attempt and every instance. It shows only whether two cursors are equal, not their order.
 * The scope binds a cursor to one service's feed, so another service's cursor is refused.
 *
 * Internally (webhook_cursors, webhook_deliveries, event_feed_readers, logs) positions stay in
 * the plain form of feed-cursor.ts: only the edges seal and open.
 */
export class CursorSeal {
  private readonly macKey: Buffer;
  private readonly encKey: Buffer;

  /** `secret`: CURSOR_SECRET, else QR_SIGNING_SECRET (config.ts); the same on every instance. */
  constructor(secret: string) {
    const keys = Buffer.from(hkdfSync('sha256', secret, 'payorch', 'feed cursor seal v1', KEY_BYTES * 2));
    this.macKey = keys.subarray(0, KEY_BYTES);
    this.encKey = keys.subarray(KEY_BYTES);
  }

  /** The cursor `serviceId` is given for `position`. */
  seal(serviceId: string, position: FeedPosition): string {
    const plain = positionBytes(position);
    const tag = this.tag(serviceId, plain);
    return Buffer.concat([tag, this.crypt(tag, plain)]).toString('base64url');
  }

  /**
   * The position of a cursor sealed for `serviceId`; null when it is not one: made up, altered,
   * sealed for another service or under another secret.
   */
  open(serviceId: string, text: string): FeedPosition | null {
    if (!SEALED_PATTERN.test(text)) return null;
    const bytes = Buffer.from(text, 'base64url');
    if (bytes.length !== TAG_BYTES + POSITION_BYTES || bytes.toString('base64url') !== text) return null;
    const tag = bytes.subarray(0, TAG_BYTES);
    const plain = this.crypt(tag, bytes.subarray(TAG_BYTES));
    if (!timingSafeEqual(tag, this.tag(serviceId, plain))) return null;
    return { xact: plain.readBigUInt64BE(0), seq: plain.readBigUInt64BE(8) };
  }

  private tag(scope: string, plain: Buffer): Buffer {
    // NUL cannot occur in a service id, so no scope is a prefix of another's input.
    return createHmac('sha256', this.macKey).update(scope).update('\u0000').update(plain).digest().subarray(0, TAG_BYTES);
  }

  /** AES-CTR is its own inverse: the same call seals and opens. */
  private crypt(tag: Buffer, bytes: Buffer): Buffer {
    const cipher = createCipheriv('aes-256-ctr', this.encKey, tag);
    return Buffer.concat([cipher.update(bytes), cipher.final()]);
  }
}

/**
 * The scope of event bus message ids (`Nats-Msg-Id`): one stream carries every service, and the
 * publisher reads its last id back to resume. A service id never contains NUL.
 */
export const EVENT_BUS_SCOPE = '\u0000event-bus';

/** Why a cursor a client sent is refused: the text of the 422 (docs/rules.md R63). */
export function refusedCursorMessage(field: string, text: string): string {
  return decodeFeedCursor(text) === null
    ? `${field}: not a cursor this feed issued`
    : `${field}: a cursor in the unsealed form of earlier versions, no longer accepted; read again without it`;
}

const KEY_BYTES = 32;
const TAG_BYTES = 16;
/** Two unsigned 64-bit integers: xact and seq. */
const POSITION_BYTES = 16;
/** 32 bytes in base64url without padding. */
const SEALED_PATTERN = /^[A-Za-z0-9_-]{43}$/;

function positionBytes(position: FeedPosition): Buffer {
  const bytes = Buffer.alloc(POSITION_BYTES);
  bytes.writeBigUInt64BE(position.xact, 0);
  bytes.writeBigUInt64BE(position.seq, 8);
  return bytes;
}
