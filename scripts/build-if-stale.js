#!/usr/bin/env node
// `npm start`'s prestart: compiles only when a source is newer than the build, so a start with
// nothing changed does not wait for tsc (docs/OPERATIONS.md, §1). tsc rewrites every output file,
// so one output's time stands for the whole build; a configuration file counts as a source.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));

/**
 * Modification time in ms, 0 when the file is missing.
 * @param {string} path
 */
function mtimeOf(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * The newest modification time of the files under `dirs` (recursively) and of `files`.
 * @param {string[]} dirs
 * @param {string[]} files
 */
function newest(dirs, files) {
  let latest = Math.max(0, ...files.map((file) => mtimeOf(join(root, file))));
  for (const dir of dirs) {
    for (const entry of readdirSync(join(root, dir), { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) latest = Math.max(latest, mtimeOf(join(entry.parentPath, entry.name)));
    }
  }
  return latest;
}

const sources = newest(
  ['src', 'packages/client/src'],
  ['tsconfig.json', 'tsconfig.build.json', 'packages/client/tsconfig.json', 'package.json'],
);
const built = Math.min(mtimeOf(join(root, 'dist/cli/main.js')), mtimeOf(join(root, 'packages/client/dist/index.js')));
if (sources > built) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const { status } = spawnSync(npm, ['run', 'build'], { cwd: root, stdio: 'inherit' });
  process.exit(status ?? 1);
}
