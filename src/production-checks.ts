import { type Config, ConfigError, DEMO_CONFIG_FILE, readConfigFile } from './config.js';
import type { Sql } from './adapters/database.js';
import { type Permissions, signingUnstated } from './domain/auth/service-keys.js';

/** Shorter secrets fall to an offline search of a captured HMAC (docs/SECURITY.md §4); bytes, as the HMAC reads them. */
export const SECRET_LENGTH_MIN = 32;
const tooShort = (secret: string) => Buffer.byteLength(secret, 'utf8') < SECRET_LENGTH_MIN;

/** The refusal line for each key in `keys` that leaves its signing unstated (config file and database alike). */
export function unstatedSigningProblems(keys: readonly { serviceId: string; permissions: Permissions }[], where: string): string[] {
  return keys
    .filter((key) => signingUnstated(key.permissions))
    .map(
      (key) =>
        `${where} service key ${key.serviceId} can create intents but does not set permissions.requireMessageSignatures (true or false)`,
    );
}
const PLACEHOLDER = 'change-me';

/** The public secrets of the shipped demo config: anyone can sign with them. */
function demoSecrets(): ReadonlySet<string> {
  const { secrets } = readConfigFile(DEMO_CONFIG_FILE);
  return new Set(Object.values(secrets).flatMap((value) => (typeof value === 'string' ? [value] : value)));
}

/**
 * What a production start refuses, each naming its setting and never a secret's value; empty
 * when the settings are safe. Outside production nothing is refused: the demo runs on the demo.
 */
export function unsafeProductionSettings(config: Config): string[] {
  if (!config.production) return [];
  const problems: string[] = [];
  if (config.configFileFromDemo) problems.push('CONFIG_FILE is unset (the shipped demo config and its public secrets would be used)');
  const publicSecrets = demoSecrets();
  const isUnsafe = (secret: string) => publicSecrets.has(secret) || secret.toLowerCase().includes(PLACEHOLDER);
  // The demo config's own secrets are its problem already named above.
  const fileSecrets = config.configFileFromDemo ? {} : config.file.secrets;
  for (const [serviceId, value] of Object.entries(fileSecrets)) {
    const secrets = typeof value === 'string' ? [value] : value;
    if (secrets.some(isUnsafe)) problems.push(`CONFIG_FILE secret of ${serviceId} is a demo secret or contains "${PLACEHOLDER}"`);
    else if (secrets.some(tooShort)) problems.push(`CONFIG_FILE secret of ${serviceId} is shorter than ${SECRET_LENGTH_MIN} bytes`);
  }
  if (!config.configFileFromDemo) problems.push(...unstatedSigningProblems(config.file.serviceKeys, 'CONFIG_FILE'));
  const named: ReadonlyArray<readonly [string, string | undefined]> = [
    ['ADMIN_TOKEN', config.adminToken],
    ['METRICS_TOKEN', config.metricsToken],
    ['QR_SIGNING_SECRET', config.qrSigningSecretGenerated ? undefined : config.qrSigningSecret],
    ['CURSOR_SECRET', config.cursorSecret],
  ];
  for (const [name, secret] of named) {
    if (secret !== undefined && isUnsafe(secret)) problems.push(`${name} is a demo secret or contains "${PLACEHOLDER}"`);
  }
  if (config.qrSigningSecretGenerated) problems.push('QR_SIGNING_SECRET is unset (invoices would not verify after a restart)');
  if (config.metricsToken === undefined) problems.push('METRICS_TOKEN is unset (/metrics would be open to anyone who can reach the port)');
  for (const [name, secret] of named) {
    if (secret !== undefined && !isUnsafe(secret) && tooShort(secret)) problems.push(`${name} is shorter than ${SECRET_LENGTH_MIN} bytes`);
  }
  if (config.pspxUrl === undefined && !config.pspxSimulatorAllowed) {
    problems.push('PSPX_URL is unset and PSPX_SIMULATOR=1 is not set (payouts would go to the built-in simulator)');
  }
  if (config.pspxUrl !== undefined && !isHttpBaseUrl(config.pspxUrl)) {
    // The value is an address, not a secret, but it may carry credentials: it is not repeated.
    problems.push('PSPX_URL is not an absolute http:// or https:// URL without credentials (every payout would fail at its first call)');
  }
  return problems;
}

/** An absolute http(s) address with a host and no user:password part, as the PSPX client needs. */
function isHttpBaseUrl(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const url = new URL(text);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' && url.username === '' && url.password === '';
}

/** Stops a production start on unsafe settings, with one line that names each of them. */
export function refuseUnsafeProductionSettings(config: Config): void {
  const problems = unsafeProductionSettings(config);
  if (problems.length > 0) throw new ConfigError(`refusing to start with NODE_ENV=production: ${problems.join('; ')}`);
}

/**
 * The keys the admin API wrote live in the database, not CONFIG_FILE: a production start reads the
 * active ones too, after the config is applied, and refuses the same way (docs/rules.md R60).
 */
export async function refuseUnstatedSigningInDatabase(config: Config, sql: Sql): Promise<void> {
  if (!config.production) return;
  const { rows } = await sql.query<{ service_id: string; permissions: Permissions }>(
    'SELECT service_id, permissions FROM service_keys WHERE active ORDER BY service_id',
  );
  const problems = unstatedSigningProblems(
    rows.map((row) => ({ serviceId: row.service_id, permissions: row.permissions })),
    'database',
  );
  if (problems.length > 0) throw new ConfigError(`refusing to start with NODE_ENV=production: ${problems.join('; ')}`);
}
