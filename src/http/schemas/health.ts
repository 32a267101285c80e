import Type from 'typebox';
import { Timestamp } from '../../domain/wire-types.js';

/** What the probes answer. */

export const HealthOk = Type.Object({ status: Type.Literal('ok'), version: Type.String(), timestamp: Timestamp });
export const Alive = Type.Object({ status: Type.Literal('ok') });
export const HealthKo = Type.Object({ status: Type.Literal('ko'), message: Type.String() });
