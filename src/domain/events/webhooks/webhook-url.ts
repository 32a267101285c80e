/**
 * The webhook URL of a service key (permissions.webhook.url). The URL is dialled by the workers
 * with the service's signature on every request, so it must mean exactly what the operator read
 * when they stored it: docs/SECURITY.md, "Webhook URLs", says what is refused and why, and what
 * is left to the network (internal addresses).
 */

/** Far above any real endpoint; it keeps a pasted document out of the key record. */
export const WEBHOOK_URL_LENGTH_MAX = 2048;

/**
 * Printable ASCII without space or backslash: no IDN or look-alike letters (a host is written in
 * punycode if at all), and nothing the URL parser would silently rewrite into something else.
 */
const PLAIN_URL_TEXT = /^[\x21-\x5b\x5d-\x7e]+$/;

const DEFAULT_PORTS: Readonly<Record<string, string>> = { 'http:': '80', 'https:': '443' };

/** What is wrong with `text` as a webhook URL, or undefined when it may be stored. */
export function webhookUrlProblem(text: string): string | undefined {
  if (text.length > WEBHOOK_URL_LENGTH_MAX) return `must have at most ${WEBHOOK_URL_LENGTH_MAX} characters`;
  if (!PLAIN_URL_TEXT.test(text)) return 'must be printable ASCII without spaces or backslashes (write an international host in punycode)';
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not an absolute URL';
  }
  const defaultPort = DEFAULT_PORTS[url.protocol];
  if (defaultPort === undefined) return 'must be an http or https URL';
  if (url.username !== '' || url.password !== '' || text.includes('@')) return 'must not carry credentials (the request is signed instead)';
  if (text.includes('#')) return 'must not carry a fragment (it is never sent)';
  if (!text.toLowerCase().startsWith(`${url.protocol}//`)) return 'must start with http:// or https://';
  // The host as written must be the host dialled: the parser turns `%61` into `a` and
  // `2130706433` into `127.0.0.1`, which would hide the real destination from whoever reads the key.
  const written = /^[a-z]+:\/\/([^/?]*)/i.exec(text)?.[1]?.toLowerCase() ?? '';
  if (written !== url.host && written !== `${url.host}:${defaultPort}`) return `must write its host as it is dialled (${url.host})`;
  return undefined;
}
