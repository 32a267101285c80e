// /console/model.js is written by the server at start from these very constants (modelModule() in
// src/http/routes/console.ts); this declaration gives the checker their types from the domain.
export { CHANNELS, FINAL_STATUSES, INTENT_STATUSES, OPERATION_TYPES } from '../dist/domain/model.js';
export { ALLOWED_TRANSITIONS, PSP_SUB_STATES } from '../dist/domain/intents/store/state-machine.js';
