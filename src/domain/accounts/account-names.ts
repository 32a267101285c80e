import type { AccountType, EntityType } from '../model.js';

export interface ParsedAccountName {
  readonly accountType: AccountType;
  readonly userId: number | null;
  readonly currency: string;
}

const CURRENCY = '([A-Z]{3})';
const ID = '([1-9][0-9]{0,15})';
const patterns: ReadonlyArray<readonly [RegExp, AccountType]> = [
  [new RegExp(`^user\\.${ID}\\.${CURRENCY}$`), 'USER_WALLET'],
  [new RegExp(`^merchant\\.${ID}\\.settlement\\.${CURRENCY}$`), 'MERCHANT_SETTLEMENT'],
  [new RegExp(`^merchant\\.${ID}\\.${CURRENCY}$`), 'MERCHANT_WALLET'],
  [new RegExp(`^agent\\.${ID}\\.settlement\\.${CURRENCY}$`), 'AGENT_SETTLEMENT'],
  [new RegExp(`^agent\\.${ID}\\.${CURRENCY}$`), 'AGENT_WALLET'],
  [new RegExp(`^service\\.${ID}\\.${CURRENCY}$`), 'SERVICE_ACCOUNT'],
  [new RegExp(`^system\\.transit\\.(?:INTERNAL|INTERNAL_P2P|PSPX|MERCHANT|MERCHANT_INVOICE|SERVICE_TRANSFER)\\.${CURRENCY}$`), 'TRANSIT'],
  [new RegExp(`^system\\.revenue\\.${CURRENCY}$`), 'REVENUE'],
  [new RegExp(`^system\\.nostro\\.[a-z0-9_-]{1,40}\\.${CURRENCY}$`), 'NOSTRO'],
  [new RegExp(`^system\\.equity\\.${CURRENCY}$`), 'EQUITY'],
];

/** The type, owner and currency that an account name's pattern implies, or null when it follows none. */
export function parseAccountName(name: string): ParsedAccountName | null {
  for (const [pattern, accountType] of patterns) {
    const match = pattern.exec(name);
    if (match === null) continue;
    const groups = match.slice(1).filter((g): g is string => g !== undefined);
    const currency = groups[groups.length - 1] ?? 'THB';
    const userId = groups.length === 2 ? Number(groups[0]) : null;
    return { accountType, userId, currency };
  }
  return null;
}

export const userWalletName = (userId: number | bigint, currency: string) => `user.${userId}.${currency}`;

export function entityAccountNames(entityType: EntityType, userId: number, currency: string) {
  switch (entityType) {
    case 'user':
      return { primary: { name: `user.${userId}.${currency}`, type: 'USER_WALLET' as const }, settlement: null };
    case 'merchant':
      return {
        primary: { name: `merchant.${userId}.${currency}`, type: 'MERCHANT_WALLET' as const },
        settlement: { name: `merchant.${userId}.settlement.${currency}`, type: 'MERCHANT_SETTLEMENT' as const },
      };
    case 'agent':
      return {
        primary: { name: `agent.${userId}.${currency}`, type: 'AGENT_WALLET' as const },
        settlement: { name: `agent.${userId}.settlement.${currency}`, type: 'AGENT_SETTLEMENT' as const },
      };
  }
}

/** docs/rules.md R19: the ten system accounts that exist after start. */
export const SYSTEM_ACCOUNTS: ReadonlyArray<{ readonly name: string; readonly type: AccountType }> = [
  ...['INTERNAL', 'INTERNAL_P2P', 'PSPX', 'MERCHANT', 'MERCHANT_INVOICE', 'SERVICE_TRANSFER'].map((channel) => ({
    name: `system.transit.${channel}.THB`,
    type: 'TRANSIT' as const,
  })),
  { name: 'system.revenue.THB', type: 'REVENUE' },
  { name: 'system.nostro.pspx.THB', type: 'NOSTRO' },
  { name: 'system.nostro.bank.THB', type: 'NOSTRO' },
  { name: 'system.equity.THB', type: 'EQUITY' },
];

/** The account that stands for the provider's partner balance: PSPX payouts credit it, top-ups debit it. */
export const pspxNostroAccountName = (currency: string) => `system.nostro.pspx.${currency}`;
