import Type from 'typebox';
import { Timestamp } from '../../domain/wire-types.js';

/** What the probes answer. */

export const HealthOk = Type.Object({ status: Type.Literal('ok'), version: Type.String(), timestamp: Timestamp });
export const Alive = Type.Object({ status: Type.Literal('ok') });
/**
 * Ready, and how Redis answers when REDIS_URL is set: `unreachable` keeps the instance in rotation,
 * since nothing of the money path needs Redis (docs/rules.md R64).
 */
export const Ready = Type.Object({
  status: Type.Literal('ok'),
  redis: Type.Optional(Type.Union([Type.Literal('ok'), Type.Literal('unreachable')])),
});
export const HealthKo = Type.Object({ status: Type.Literal('ko'), message: Type.String() });
