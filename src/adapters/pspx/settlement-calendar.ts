/** The provider's settlement calendar: dates are YYYYMMDD in Asia/Bangkok (UTC+7, no daylight saving). */

const bangkokDate = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Bangkok', year: 'numeric', month: '2-digit', day: '2-digit' });

/** Today in Asia/Bangkok as YYYYMMDD, the provider's settlement calendar. */
export function bangkokSettlementDate(at: Date = new Date()): string {
  const parts = Object.fromEntries(bangkokDate.formatToParts(at).map((p) => [p.type, p.value]));
  return `${parts.year}${parts.month}${parts.day}`;
}

/** Whether `value` is YYYYMMDD naming a real calendar day (20240230 is not). */
export function isCalendarDate(value: string): boolean {
  if (!/^[0-9]{8}$/.test(value)) return false;
  const [year, month, day] = [Number(value.slice(0, 4)), Number(value.slice(4, 6)), Number(value.slice(6, 8))];
  const at = new Date(Date.UTC(year, month - 1, day));
  return year >= 1970 && at.getUTCFullYear() === year && at.getUTCMonth() === month - 1 && at.getUTCDate() === day;
}

/** The calendar day before a YYYYMMDD date. */
export function dayBefore(date: string): string {
  const at = new Date(Date.UTC(Number(date.slice(0, 4)), Number(date.slice(4, 6)) - 1, Number(date.slice(6, 8)) - 1));
  return at.toISOString().slice(0, 10).replaceAll('-', '');
}
