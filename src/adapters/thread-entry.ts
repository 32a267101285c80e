/**
 * The module a worker thread runs, `file` beside the module at `moduleUrl`. From dist/ it is the
 * built file there. Under the test runner the caller is a TypeScript source, which a worker
 * thread cannot load: the built copy in dist/ runs instead, and the tests' global setup rebuilds
 * dist/ when a source is newer.
 */
export function threadEntry(file: string, moduleUrl: string): URL {
  const beside = new URL(file, moduleUrl);
  if (!moduleUrl.endsWith('.ts')) return beside;
  const { pathname } = beside;
  const srcAt = pathname.lastIndexOf('/src/');
  if (srcAt < 0) throw new Error(`${moduleUrl} is not under src/`);
  return new URL(`${pathname.slice(0, srcAt)}/dist/${pathname.slice(srcAt + '/src/'.length)}`, beside);
}
