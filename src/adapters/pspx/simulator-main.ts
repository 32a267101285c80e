/**
 * The PSPX simulator as a process of its own, for running payorch against it with PSPX_URL
 * (`npm run pspx-sim`, then PSPX_URL=http://127.0.0.1:4010). Settings come from the environment:
 * PSPX_SIM_PORT (4010), PSPX_SIM_HOST (127.0.0.1), PSPX_SIM_BALANCE (satang, 100000000),
 * PSPX_SIM_CONFIRM_HOLD_MS (30000), PSPX_SIM_ADMIN (1: knobs and counters at POST /_sim/knobs
 * {delayMs?, failureRate?, failNext?} and GET /_sim/stats, for chaos runs; POST /_sim/statement to close
 * a day early and plant statement breaks, docs/PSPX.md).
 */
import { createSimulatorServer } from './pspx-simulator.js';

function integerEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer (got ${raw})`);
  return value;
}

const balance = process.env.PSPX_SIM_BALANCE;
if (balance !== undefined && !/^[0-9]{1,30}$/.test(balance)) throw new Error(`PSPX_SIM_BALANCE must be satang digits (got ${balance})`);

const server = await createSimulatorServer({
  port: integerEnv('PSPX_SIM_PORT', 4010),
  host: process.env.PSPX_SIM_HOST || '127.0.0.1',
  confirmHoldMs: integerEnv('PSPX_SIM_CONFIRM_HOLD_MS', 30_000),
  adminRoutes: process.env.PSPX_SIM_ADMIN === '1',
  ...(balance === undefined ? {} : { initialBalance: BigInt(balance) }),
});
console.log(`PSPX simulator listening on ${server.url}`);

const stop = () => {
  server.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
