import { buildIfStale } from './service-process.js';

/**
 * Worker threads (the fee workers) and spawned service processes run the built dist/, not the
 * TypeScript sources the test runner transforms: rebuild it once, before any test, when a source
 * is newer.
 */
export default async function setup(): Promise<void> {
  await buildIfStale();
}
