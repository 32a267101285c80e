#!/usr/bin/env node
// Packs the release tarball with every production dependency inside it, as `npm ci` installed
// them from package-lock.json, so that `npm install --omit=dev payorch-<version>.tgz` resolves
// nothing afresh (docs/OPERATIONS.md, section 10, Dependency versions).
//
// The bundle list is written only into a staging copy: with every dependency in
// package.json's own bundleDependencies, npm 11 at the repository root (npm ci, npm install)
// never finishes building its tree; it keeps moving the overridden @nats-io/nuid back and forth.
// npm pack reads the installed node_modules instead, and bundles from it.
//
// Usage: node scripts/pack-release.js [destination folder]; dist/ must be built (npm run release:pack builds it).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const destination = resolve(process.argv[2] ?? process.cwd());

/** @type {{ name: string, version: string, files: string[], dependencies: Record<string, string>, workspaces: string[] }} */
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const client = join(root, 'packages/client');
/** @type {{ files: string[] }} */
const clientManifest = JSON.parse(readFileSync(join(client, 'package.json'), 'utf8'));

if (!existsSync(join(root, 'dist')) || !existsSync(join(client, 'dist'))) {
  console.error('dist/ is missing: run npm run build first');
  process.exit(1);
}

const staging = mkdtempSync(join(tmpdir(), 'payorch-release-'));
try {
  /** @param {string} from @param {string} to */
  const copy = (from, to) => {
    if (existsSync(from)) cpSync(from, to, { recursive: true, force: true, verbatimSymlinks: true, preserveTimestamps: true });
  };
  for (const entry of [...manifest.files, 'README.md', 'LICENSE']) copy(join(root, entry), join(staging, entry));
  // The workspace keeps its place, so that node_modules/@payorch/client, a link to it, resolves.
  for (const entry of [...clientManifest.files, 'package.json', 'README.md', 'LICENSE']) {
    copy(join(client, entry), join(staging, 'packages/client', entry));
  }
  // Hard links: a copy of node_modules that costs neither space nor much time.
  execFileSync('cp', ['-al', join(root, 'node_modules'), join(staging, 'node_modules')]);
  const staged = { ...manifest, bundleDependencies: Object.keys(manifest.dependencies) };
  writeFileSync(join(staging, 'package.json'), `${JSON.stringify(staged, null, 2)}\n`);
  // dist/ is in place: the prepack build is skipped.
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', destination], {
    cwd: staging,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
} finally {
  rmSync(staging, { recursive: true, force: true });
}
