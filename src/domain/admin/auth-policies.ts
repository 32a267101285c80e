import type { StepUpLevel } from '../model.js';
import { type AdminEntity, read } from './admin-entity.js';

export interface AuthPolicyRecord {
  readonly id: number;
  readonly scope: string;
  readonly condition: Record<string, unknown>;
  readonly requiredStepUp: StepUpLevel;
  readonly reasonCode: string;
  readonly priority: number;
  readonly active: boolean;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export const authPolicies: AdminEntity<AuthPolicyRecord> = {
  entity: 'auth-policy',
  table: 'auth_policies',
  keyColumn: 'id',
  columns: {
    scope: { column: 'scope' },
    condition: { column: 'condition', cast: '::jsonb', encode: (value) => JSON.stringify(value) },
    requiredStepUp: { column: 'required_step_up' },
    reasonCode: { column: 'reason_code' },
    priority: { column: 'priority' },
    active: { column: 'active' },
  },
  hasUpdatedAt: true,
  orderBy: 'id',
  fromRow: (row) => ({
    id: read.id(row.id),
    scope: read.string(row.scope),
    condition: read.object(row.condition),
    requiredStepUp: read.string(row.required_step_up) as StepUpLevel,
    reasonCode: read.string(row.reason_code),
    priority: read.integer(row.priority),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
    updatedAt: read.timestamp(row.updated_at),
  }),
  keyOf: (record) => String(record.id),
};
