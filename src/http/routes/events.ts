import Type from 'typebox';
import type { Database } from '../../adapters/database.js';
import { apiError } from '../../domain/errors.js';
import { type CursorSeal, refusedCursorMessage } from '../../domain/events/cursor-seal.js';
import { cursorIssuedBefore, cursorPruned, FeedEventView, feedEventView, readFeedSettled } from '../../domain/events/feed.js';
import type { App } from '../typed-app.js';
import { responses } from '../schemas/shared.js';

/** docs/rules.md R54. */
export const EVENTS_LIMIT_DEFAULT = 100;
export const EVENTS_LIMIT_MAX = 500;

const EventsQuery = Type.Object(
  {
    after: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'nextCursor (or an event cursor) already read; absent: from the oldest kept',
      }),
    ),
    limit: Type.Integer({ minimum: 1, maximum: EVENTS_LIMIT_MAX, default: EVENTS_LIMIT_DEFAULT }),
  },
  { additionalProperties: false },
);

const DESCRIPTION =
  "Every status change of the calling service's intents, in the order the service committed them. " +
  'Follow `nextCursor` (pass it as `after`) to see each change exactly once, with no gap, across restarts. ' +
  'A page that is not full holds every change committed before the call, unless a transaction held open for more ' +
  'than a second delays them: the call waits up to that second for them, then answers without them (a later page has them). ' +
  'A cursor older than the event retention (EVENT_RETENTION_DAYS) is answered 410 CURSOR_EXPIRED.';

/** GET /events: the calling service's event feed (docs/EVENTS.md). */
export function eventRoutes(app: App, deps: { readonly db: Database; readonly cursors: CursorSeal }): void {
  app.get(
    '/events',
    {
      schema: {
        tags: ['events'],
        operationId: 'listEvents',
        summary: "Status changes of the calling service's intents, after a cursor",
        description: DESCRIPTION,
        querystring: EventsQuery,
        response: responses({ 200: Type.Object({ events: Type.Array(FeedEventView), nextCursor: Type.String() }) }, ['CURSOR_EXPIRED']),
      },
    },
    async (request) => {
      const { after, limit } = request.query;
      const { serviceId } = request.caller;
      const afterPosition = after === undefined ? null : deps.cursors.open(serviceId, after);
      if (afterPosition === null && after !== undefined)
        throw apiError('VALIDATION_ERROR', refusedCursorMessage('querystring.after', after));
      const page = await readFeedSettled(deps.db, { serviceId, after: afterPosition, limit });
      if (afterPosition !== null && !cursorIssuedBefore(afterPosition, page))
        throw apiError('VALIDATION_ERROR', 'querystring.after: not a cursor this feed issued');
      if (afterPosition !== null && cursorPruned(afterPosition, page))
        throw apiError('CURSOR_EXPIRED', 'the events after this cursor are past the retention and were pruned; read again without after');
      return {
        events: page.events.map((event) => feedEventView(event, deps.cursors)),
        nextCursor: deps.cursors.seal(serviceId, page.next),
      };
    },
  );
}
