import type { StatementEntry, StatementHeader } from './statements.js';

/**
 * The streamed formats of a statement (docs/rules.md R58), written chunk by chunk as the entries
 * arrive, so that a statement of any length holds one page in memory.
 */

export const STATEMENT_FORMATS = ['json', 'csv', 'camt053'] as const;
export type StatementFormat = (typeof STATEMENT_FORMATS)[number];

export const CSV_COLUMNS = ['at', 'intentId', 'refundId', 'operationType', 'direction', 'amount', 'feeAmount', 'balanceAfter'] as const;

/**
 * One line per entry under a header line. No field needs quoting: each is a timestamp, a UUID, a
 * name of the operation vocabulary, a direction or digits (RFC 4180 quoting would change nothing).
 */
export async function* csvStatement(pages: AsyncIterable<readonly StatementEntry[]>): AsyncGenerator<string> {
  yield `${CSV_COLUMNS.join(',')}\r\n`;
  for await (const page of pages) {
    let chunk = '';
    for (const e of page) {
      // CSV_COLUMNS, in order.
      chunk += `${e.at},${e.intentId ?? ''},${e.refundId ?? ''},${e.operationType ?? ''},${e.direction},${e.amount},${e.feeAmount},${e.balanceAfter}\r\n`;
    }
    yield chunk;
  }
}

/** Satang as baht with two decimals, and the sign as camt.053's credit/debit indicator. */
function camtAmount(satang: string): { amount: string; indicator: 'CRDT' | 'DBIT' } {
  const negative = satang.startsWith('-');
  const digits = (negative ? satang.slice(1) : satang).padStart(3, '0');
  return { amount: `${digits.slice(0, -2)}.${digits.slice(-2)}`, indicator: negative ? 'DBIT' : 'CRDT' };
}

const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };
/** Text content and attribute values; account names and ids follow strict patterns, but a document is never malformed. */
const xml = (text: string) => text.replace(/[&<>"']/g, (c) => XML_ESCAPES[c] ?? c);

/** An instant as xs:dateTime in UTC. */
const isoUtc = (instant: string) => new Date(instant).toISOString();

function camtBalance(type: 'OPBD' | 'CLBD', balance: string, currency: string, at: string): string {
  const { amount, indicator } = camtAmount(balance);
  return (
    `<Bal><Tp><CdOrPrtry><Cd>${type}</Cd></CdOrPrtry></Tp><Amt Ccy="${xml(currency)}">${amount}</Amt>` +
    `<CdtDbtInd>${indicator}</CdtDbtInd><Dt><DtTm>${isoUtc(at)}</DtTm></Dt></Bal>`
  );
}

function camtEntry(entry: StatementEntry, currency: string): string {
  return (
    `<Ntry>${entry.intentId === null ? '' : `<NtryRef>${entry.intentId}</NtryRef>`}` +
    `<Amt Ccy="${currency}">${camtAmount(entry.amount).amount}</Amt><CdtDbtInd>${entry.direction === 'CREDIT' ? 'CRDT' : 'DBIT'}</CdtDbtInd>` +
    `<Sts><Cd>BOOK</Cd></Sts><BookgDt><DtTm>${entry.at}</DtTm></BookgDt>` +
    `<BkTxCd><Prtry><Cd>${xml(entry.operationType ?? 'OPENING')}</Cd></Prtry></BkTxCd></Ntry>`
  );
}

/**
 * ISO 20022 camt.053.001.08 (BankToCustomerStatementV08): one statement of the account, its
 * opening (OPBD) and closing (CLBD) booked balances, one booked entry per posting.
 */
export async function* camt053Statement(
  header: StatementHeader,
  pages: AsyncIterable<readonly StatementEntry[]>,
  ids: { messageId: string; createdAt: Date },
): AsyncGenerator<string> {
  const created = ids.createdAt.toISOString();
  const currency = xml(header.currency);
  yield '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"><BkToCstmrStmt>' +
    `<GrpHdr><MsgId>${xml(ids.messageId)}</MsgId><CreDtTm>${created}</CreDtTm></GrpHdr>` +
    `<Stmt><Id>${xml(ids.messageId)}</Id><CreDtTm>${created}</CreDtTm>` +
    `<FrToDt><FrDtTm>${isoUtc(header.from)}</FrDtTm><ToDtTm>${isoUtc(header.to)}</ToDtTm></FrToDt>` +
    `<Acct><Id><Othr><Id>${xml(header.accountName)}</Id></Othr></Id><Ccy>${currency}</Ccy>` +
    '<Svcr><FinInstnId><Othr><Id>payorch</Id></Othr></FinInstnId></Svcr></Acct>' +
    camtBalance('OPBD', header.openingBalance, header.currency, header.from) +
    camtBalance('CLBD', header.closingBalance, header.currency, header.to);
  for await (const page of pages) {
    let chunk = '';
    for (const entry of page) chunk += camtEntry(entry, currency);
    yield chunk;
  }
  yield '</Stmt></BkToCstmrStmt></Document>\n';
}
