import type { Sql } from '../../adapters/database.js';
import { apiError } from '../errors.js';
import type { Channel } from '../model.js';
import { channelCarries } from '../channels/channels.js';

/** An active route as the cache holds it (config-cache.ts). */
export interface RouteRow {
  readonly operationType: string;
  readonly minAmount: bigint;
  /** null: no upper bound. */
  readonly maxAmount: bigint | null;
  readonly channel: Channel;
}

/** docs/rules.md R20: the active route of lowest priority whose [minAmount, maxAmount] holds the amount. */
export async function routeChannel(sql: Sql, operationType: string, amount: bigint): Promise<Channel> {
  const { rows } = await sql.query<{ channel: Channel }>(
    `SELECT channel FROM routes
      WHERE active AND operation_type = $1 AND min_amount <= $2 AND (max_amount IS NULL OR max_amount >= $2)
      ORDER BY priority, id LIMIT 1`,
    [operationType, amount.toString()],
  );
  const channel = rows[0]?.channel;
  if (channel === undefined) throw noRoute(operationType, amount);
  return carried(channel, operationType);
}

/** docs/rules.md R20 over cached routes, which are already active and in (priority, id) order. */
export function pickChannel(routes: readonly RouteRow[], operationType: string, amount: bigint): Channel {
  const route = routes.find(
    (r) => r.operationType === operationType && r.minAmount <= amount && (r.maxAmount === null || r.maxAmount >= amount),
  );
  if (route === undefined) throw noRoute(operationType, amount);
  return carried(route.channel, operationType);
}

/**
 * Route writes refuse a channel that cannot carry the operation type; a route stored before that
 * check (or by hand) is refused here, before any money moves, rather than followed.
 */
function carried(channel: Channel, operationType: string): Channel {
  if (!channelCarries(channel, operationType))
    throw apiError('NO_ROUTE', `the route names channel ${channel}, which cannot carry ${operationType}`);
  return channel;
}

const noRoute = (operationType: string, amount: bigint) => apiError('NO_ROUTE', `no route for ${operationType} and amount ${amount}`);
