import type { AccountRecord } from '../accounts/accounts.js';
import { isReceiverType, RECEIVER_TYPES, RECEIVER_TYPES_WITH_BANK } from '../../adapters/pspx/pspx-client.js';
import { apiError } from '../errors.js';

const FIELD_LENGTH_MAX = 100;

/** The part of an intent request a channel's checks read. */
export interface ChannelRequest {
  readonly metadata: Readonly<Record<string, unknown>>;
}

/** PSPX_WITHDRAWAL and THAI_QR_PAY: a registered wallet and a valid receiver block `metadata.ipps`. */
export function checkPspxRequest(request: ChannelRequest, payer: AccountRecord | null): void {
  if (payer === null || payer.pspxWalletId === null) {
    throw apiError('PSPX_NOT_REGISTERED', 'the payer has no registered PSPX wallet');
  }
  const problem = ippsProblem(request.metadata.ipps);
  if (problem !== null) throw apiError('PSPX_METADATA_INVALID', problem);
}

const isText = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= FIELD_LENGTH_MAX;

function ippsProblem(ipps: unknown): string | null {
  if (typeof ipps !== 'object' || ipps === null || Array.isArray(ipps)) return 'metadata.ipps must be an object';
  const block = ipps as Record<string, unknown>;
  const { receiverType } = block;
  if (!isReceiverType(receiverType)) return `metadata.ipps.receiverType must be one of ${RECEIVER_TYPES.join(', ')}`;
  if (!isText(block.receiverAccount)) return 'metadata.ipps.receiverAccount is required';
  if (RECEIVER_TYPES_WITH_BANK.includes(receiverType) && !isText(block.receiverBank)) {
    return `metadata.ipps.receiverBank is required for ${receiverType}`;
  }
  return null;
}
