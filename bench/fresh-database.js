import pg from 'pg';

/**
 * Drops and creates `name` on the server of `adminUrl`, for a bench section that needs a database
 * of its own; answers its URL.
 * @param {string} adminUrl
 * @param {string} name
 * @returns {Promise<string>}
 */
export async function recreateBenchDatabase(adminUrl, name) {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
