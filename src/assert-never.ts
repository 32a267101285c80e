/** The end of every exhaustive switch: the compiler refuses a case left out, and a value from outside the types throws. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value ${JSON.stringify(value)}`);
}
