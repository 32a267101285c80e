import type { AccountRecord } from '../accounts/accounts.js';
import { type ChannelRequest, checkPspxRequest } from './pspx-checks.js';
import { type Channel, type IntentStatus, isPspxOperationType } from '../model.js';

/**
 * What each channel does with the intents a route sends it, in one place per channel: which
 * operation types it can carry, where the new intent stands, which transit account holds its
 * reservation, and the checks only it makes. Code that creates or moves an intent asks this
 * table instead of comparing channel names.
 */
export interface ChannelBehaviour {
  /**
   * Each channel's money path assumes a shape: an invoice has no payer until it is confirmed, so
   * only MERCHANT_INVOICE carries INVOICE_PAYMENT and it carries nothing else (an invoice settled
   * by a synchronous channel would be SETTLED with no money moved; a payment held as an invoice
   * would keep its reservation with no one to confirm it); a PSPX payout needs a payer wallet and
   * a receiver block (docs/design.md, "Requests").
   */
  readonly carries: (operationType: string) => boolean;
  /**
   * SETTLED: reserved and settled in the request's transaction. AUTHORIZED: reserved, completed
   * later by the PSP worker. CREATED: a two-phase invoice, no payer and no money until confirmed.
   */
  readonly createdAs: Extract<IntentStatus, 'SETTLED' | 'AUTHORIZED' | 'CREATED'>;
  /** docs/rules.md R17: the transit account (system.transit.{name}.{currency}) that holds the reservation. */
  readonly transit: string;
  /** Checks this channel makes of a request before anything is stored; each refusal throws. */
  readonly check?: (request: ChannelRequest, payer: AccountRecord | null) => void;
}

const notInvoice = (operationType: string) => operationType !== 'INVOICE_PAYMENT';

export const CHANNEL_BEHAVIOUR: Readonly<Record<Channel, ChannelBehaviour>> = {
  INTERNAL_P2P: { carries: notInvoice, createdAs: 'SETTLED', transit: 'INTERNAL_P2P' },
  PSPX_TRANSFER: { carries: isPspxOperationType, createdAs: 'AUTHORIZED', transit: 'PSPX', check: checkPspxRequest },
  MERCHANT_INVOICE: { carries: (operationType) => operationType === 'INVOICE_PAYMENT', createdAs: 'CREATED', transit: 'MERCHANT_INVOICE' },
  SERVICE_TRANSFER: { carries: notInvoice, createdAs: 'SETTLED', transit: 'SERVICE_TRANSFER' },
  ADMIN: { carries: notInvoice, createdAs: 'SETTLED', transit: 'INTERNAL' },
};

/** Whether a route may send this operation type to this channel. */
export const channelCarries = (channel: Channel, operationType: string): boolean => CHANNEL_BEHAVIOUR[channel].carries(operationType);

/** Whether the channel's intents are two-phase invoices: no payer, fees or money until confirmed. */
export const isInvoiceChannel = (channel: Channel): boolean => CHANNEL_BEHAVIOUR[channel].createdAs === 'CREATED';

export const transitAccountName = (channel: Channel, currency: string) =>
  `system.transit.${CHANNEL_BEHAVIOUR[channel].transit}.${currency}`;
