import { parentPort, workerData } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { createLocalFeeEngine, type LocalFeeEngineOptions } from './fee-engine.js';
import { FeeEvaluationError } from './fee-evaluation-error.js';
import {
  type FeeBatch,
  type FeeBatchAnswer,
  type FeeJob,
  type FeeJobAnswer,
  type FeeWorkerData,
  WORKER_READY,
} from './fee-worker-messages.js';

/**
 * A fee worker thread: its own QuickJS sandbox and compiled-rule cache, one batch at a time. The
 * main thread kills it when a job overruns (fee-worker-pool.ts), whatever the expression is doing.
 */
const port = parentPort;
if (port === null) throw new Error('fee-worker.js runs as a worker thread');
const { sandbox, progress } = workerData as FeeWorkerData<LocalFeeEngineOptions>;
const startedAt = new Float64Array(progress);
const engine = await createLocalFeeEngine(sandbox);

function answer(job: FeeJob): FeeJobAnswer {
  try {
    const result = job.kind === 'fees' ? engine.calculateFees(job.rules, job.context) : engine.dryRun(job.expression, job.context);
    return { ok: true, result };
  } catch (error) {
    if (error instanceof FeeEvaluationError)
      return { ok: false, failure: { reason: error.reason, message: error.message, ruleId: error.ruleId } };
    // Any other failure is a bug of ours, not of the rule: reported as such, never as a rule's fault.
    return { ok: false, failure: { reason: 'exception', message: `fee worker failed: ${String(error)}`, ruleId: undefined } };
  }
}

port.on('message', (batch: FeeBatch) => {
  const answers = batch.jobs.map((job, index) => {
    startedAt[index] = performance.timeOrigin + performance.now();
    return answer(job);
  });
  startedAt[startedAt.length - 1] = performance.timeOrigin + performance.now();
  port.postMessage({ id: batch.id, answers } satisfies FeeBatchAnswer);
});
// A fresh thread's first evaluation compiles the sandbox's code paths, and its event loop is busy
// for a while after the module ran: a job sent at once would spend its 100 ms there and be cut as
// a runaway. So one evaluation runs first, and ready is said from a later turn of the loop.
try {
  engine.dryRun('[]', { operationType: 'WARM_UP', amount: 0n, currency: 'THB', metadata: {} });
} catch (error) {
  // The sandbox's clock is the whole process's CPU time: on a loaded machine, other threads
  // starting up can spend a trivial warm-up's 100 ms. Cut, it has still compiled what it was for,
  // and the runtime it leaves is rebuilt on the first job; it must not fail the pool's start.
  if (!(error instanceof FeeEvaluationError && error.reason === 'timeout')) throw error;
}
setImmediate(() => port.postMessage(WORKER_READY));
