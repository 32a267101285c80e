import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The repository stands alone: every rule the code relies on is written in docs/rules.md, so no
 * file may send a reader to documents that ship elsewhere, and every citation of docs/rules.md
 * must name a rule that is there. The patterns are written so that this file does not match them.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RULES_PATH = 'docs/rules.md';

const OUTSIDE_REFERENCES: ReadonlyArray<readonly [string, RegExp]> = [
  ['the rulings file kept outside the repository', /DECISION[S]/],
  ['the shared folder beside the repository', /\.\.\/share[d]\b/],
  ['the specification kept outside the repository', /share[d]\/spec/],
  ['an absolute path into the shared folder', /\/work\/share[d]/],
  ['an issue number of a tracker outside the repository', /\bissue #?\d+/i],
];

/** Tracked regular files that hold text: links (a tracked node_modules link, say) and binaries are skipped. */
function trackedTextFiles(): Array<{ path: string; text: string }> {
  const paths = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((p) => p !== '');
  return paths.flatMap((path) => {
    const full = join(ROOT, path);
    const stat = lstatSync(full, { throwIfNoEntry: false });
    if (stat === undefined || !stat.isFile()) return [];
    const bytes = readFileSync(full);
    if (bytes.includes(0)) return [];
    return [{ path, text: bytes.toString('utf8') }];
  });
}

const files = trackedTextFiles();
const rules = readFileSync(join(ROOT, RULES_PATH), 'utf8');

/** Every `<a id="…"></a>**Label…**` entry of docs/rules.md: its anchor, R-number (if any) and name. */
function ruleEntries(): Array<{ anchor: string; number: string | null; name: string }> {
  const entries = [...rules.matchAll(/<a id="([a-z0-9-]+)"><\/a>\*\*(?:(R\d+) )?([^*]+?)[.,]?\*\*/g)];
  return entries.map((m) => ({ anchor: m[1] ?? '', number: m[2] ?? null, name: m[3] ?? '' }));
}

function linesMatching(pattern: RegExp): string[] {
  return files.flatMap(({ path, text }) =>
    text.split('\n').flatMap((line, index) => (pattern.test(line) ? [`${path}:${index + 1}: ${line.trim().slice(0, 160)}`] : [])),
  );
}

describe('the repository is self-contained', () => {
  it('reads the tracked files, docs/rules.md among them', () => {
    expect(files.map((f) => f.path)).toContain(RULES_PATH);
    expect(files.length).toBeGreaterThan(100);
  });

  it.each(OUTSIDE_REFERENCES)('no tracked file names %s', (_what, pattern) => {
    expect(linesMatching(pattern)).toEqual([]);
  });

  it('every "docs/rules.md R<n>" names a numbered rule that docs/rules.md defines', () => {
    const numbers = new Set(ruleEntries().flatMap((e) => (e.number === null ? [] : [e.number])));
    expect(numbers.size).toBeGreaterThan(30);
    const unknown = files.flatMap(({ path, text }) =>
      [...text.matchAll(/docs\/rules\.md (R\d+(?:(?:, | and )R\d+)*)/g)].flatMap((m) =>
        (m[1] ?? '')
          .split(/, | and /)
          .filter((n) => !numbers.has(n))
          .map((n) => `${path}: ${n}`),
      ),
    );
    expect(unknown).toEqual([]);
  });

  it('every "docs/rules.md, <Name>" and every link into it names an entry that is there', () => {
    const entries = ruleEntries();
    const names = new Set(entries.map((e) => e.name));
    const anchors = new Set(entries.map((e) => e.anchor));
    const unknown = files.flatMap(({ path, text }) => [
      ...[...text.matchAll(/docs\/rules\.md, ([A-Z][\w-]*(?: [\w-]+)*)/g)]
        .map((m) => m[1] ?? '')
        .filter((n) => !names.has(n))
        .map((n) => `${path}: "${n}"`),
      ...[...text.matchAll(/rules\.md#([\w-]+)/g)]
        .map((m) => m[1] ?? '')
        .filter((a) => !anchors.has(a))
        .map((a) => `${path}: #${a}`),
    ]);
    expect(unknown).toEqual([]);
  });
});

/**
 * A repository path as comments and docs write it: from a top-level folder to a file with an
 * extension, or to a folder with its trailing slash. Placeholders (`migrations/NNN-name.sql`,
 * `sql/<concept>/`) and globs stop the match or are skipped.
 */
const REPOSITORY_PATH =
  /(?<![\w./@-])(?:src|test|docs|sql|migrations|bench|chaos|console|packages|scripts|config|deploy|bin|\.ci)\/[\w./-]*(?:\.(?:ts|js|mjs|cjs|sql|md|json|svg|png|yaml|yml|sh|html|css)\b|\/)/g;
const PLACEHOLDER = /NNN|\bNN-/;

/**
 * Files whose text is history or generated: the monthly performance logs and the migrations keep
 * the words they were written with (an applied migration never changes), and the generated files
 * name no paths of their own.
 */
const isHistoryOrGenerated = (path: string) =>
  path.startsWith('docs/perf-log/') ||
  path.startsWith('migrations/') ||
  ['package-lock.json', 'docs/openapi.json', 'packages/client/src/openapi.ts'].includes(path);

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const headingAnchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

function anchorsOf(markdown: string): Set<string> {
  return new Set([
    ...[...markdown.matchAll(/<a id="([\w-]+)"><\/a>/g)].map((m) => m[1] ?? ''),
    ...[...markdown.matchAll(/^#+ (.+)$/gm)].map((m) => headingAnchor(m[1] ?? '')),
  ]);
}

describe('every path a comment or a document names is there', () => {
  const current = files.filter(({ path }) => !isHistoryOrGenerated(path));

  it('names only repository files and folders that exist', () => {
    const missing = current.flatMap(({ path, text }) =>
      [...text.matchAll(REPOSITORY_PATH)]
        .map((m) => m[0])
        .filter((named) => !PLACEHOLDER.test(named) && !existsSync(join(ROOT, named)))
        .map((named) => `${path}: ${named}`),
    );
    expect(missing).toEqual([]);
  });

  it('links into a document only at an anchor or heading it has', () => {
    const unknown = current.flatMap(({ path, text }) =>
      [...text.matchAll(/((?:[\w.-]+\/)*[\w.-]+\.md)#([\w-]+)/g)].flatMap((m) => {
        const [named, anchor] = [m[1] ?? '', m[2] ?? ''];
        const target = [join(ROOT, named), join(ROOT, dirname(path), named)].find((candidate) => existsSync(candidate));
        if (target === undefined) return [`${path}: ${named} (no such file)`];
        return anchorsOf(readFileSync(target, 'utf8')).has(anchor) ? [] : [`${path}: ${named}#${anchor}`];
      }),
    );
    expect(unknown).toEqual([]);
  });

  it('would see a path that is gone', () => {
    // Joined here, so that this file does not name them itself.
    const gone = [['src', 'client', 'types.ts'].join('/'), ['docs', 'ARCHITECTURE.md'].join('/')];
    const named = [...`see ${gone[0]}, and ${gone[1]}.`.matchAll(REPOSITORY_PATH)].map((m) => m[0]);
    expect(named).toEqual(gone);
    expect(named.filter((p) => existsSync(join(ROOT, p)))).toEqual([]);
  });
});
