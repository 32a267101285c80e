/**
 * The types a client generates from docs/openapi.json (openapi-typescript, written to
 * test/types/openapi.ts by `npm run openapi`) against the SDK's own types: `npm run typecheck`
 * does not compile when a main shape of the document and of the SDK disagree.
 */
import type {
  EntityAccount as SdkEntityAccount,
  Balance as SdkBalance,
  IntentCreated as SdkIntentCreated,
  IntentCreateRequest as SdkIntentCreateRequest,
  Intent as SdkIntent,
  IntentStatus as SdkIntentStatus,
  OperationType as SdkOperationType,
  Quote as SdkQuote,
  UserAccount as SdkUserAccount,
} from '@payorch/client';
import type { PayorchErrorBody } from '@payorch/client';
import type { ErrorCode } from '../../src/domain/errors.js';
import type { components, operations } from './openapi.js';

type Schemas = components['schemas'];

/** True when each type is assignable to the other. */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** True when A is assignable to B: the generated type is the narrower one. */
type Narrower<A, B> = [A] extends [B] ? true : false;
type Holds<T extends true> = T;

export type OpenApiAgreesWithTheSdk = [
  Holds<Mutual<Schemas['Intent'], SdkIntent>>,
  Holds<Mutual<Schemas['IntentCreated'], SdkIntentCreated>>,
  Holds<Mutual<Schemas['IntentStatus'], SdkIntentStatus>>,
  Holds<Mutual<Schemas['OperationType'], SdkOperationType>>,
  Holds<Mutual<Schemas['Account'], SdkUserAccount>>,
  Holds<Mutual<Schemas['Balance'], SdkBalance>>,
  Holds<Mutual<Schemas['Quote'], SdkQuote>>,
  // The body the SDK sends: idempotencyKey is optional there because the SDK fills it in.
  Holds<Narrower<Schemas['IntentCreateRequest'], SdkIntentCreateRequest>>,
  Holds<Mutual<Omit<Schemas['IntentCreateRequest'], 'idempotencyKey'>, Omit<SdkIntentCreateRequest, 'idempotencyKey'>>>,
  Holds<Mutual<operations['createIntent']['requestBody']['content']['application/json'], Schemas['IntentCreateRequest']>>,
  // The SDK reads any error body (a proxy's too); the document's is one of the catalogue's.
  Holds<Narrower<Schemas['Error'], PayorchErrorBody>>,
  Holds<Mutual<Schemas['Error']['error'], ErrorCode>>,
  Holds<Mutual<Schemas['EntityAccount'], SdkEntityAccount>>,
];
