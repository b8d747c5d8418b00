/**
 * Every relative link and `#anchor` in README.md, docs/*.md and the packages' READMEs must lead
 * somewhere: the README is a short front page whose sections moved into docs/, so a renamed heading
 * or a moved page would otherwise leave links that open nothing.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const repo = path.join(__dirname, '..', '..');

describe('links in README.md, docs/ and the packages', () => {
  it('resolve: every relative link names a file that exists, every #anchor a heading there', () => {
    const docs = fs
      .readdirSync(path.join(repo, 'docs'))
      .filter(name => name.endsWith('.md'))
      .map(name => path.join(repo, 'docs', name));
    const packages = fs
      .readdirSync(path.join(repo, 'packages'))
      .map(name => path.join(repo, 'packages', name, 'README.md'))
      .filter(file => fs.existsSync(file));
    const files = [path.join(repo, 'README.md'), ...docs, ...packages];
    expect(docs.length).toBeGreaterThan(10);
    expect(packages.length).toBeGreaterThan(0);
    expect(brokenLinks(files)).toEqual([]);
  });

  it('reach every docs page from the README in one click', () => {
    const readme = path.join(repo, 'README.md');
    const linked = new Set(
      linksOf(fs.readFileSync(readme, 'utf8')).map(link =>
        path.resolve(repo, splitAnchor(link)[0])
      )
    );
    const unreached = fs
      .readdirSync(path.join(repo, 'docs'))
      .filter(name => name.endsWith('.md') && name !== 'README.md')
      .filter(name => !linked.has(path.join(repo, 'docs', name)));
    expect(unreached).toEqual([]);
  });

  it('reports a missing file, a missing anchor and a missing anchor in this page', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-links-'));
    try {
      const page = path.join(dir, 'page.md');
      fs.writeFileSync(
        path.join(dir, 'other.md'),
        '# Other\n\n## What a link’s holder reaches (`--flag`)\n'
      );
      fs.writeFileSync(
        page,
        [
          '# Page',
          '',
          '[fine](other.md#what-a-links-holder-reaches---flag) [top](#page)',
          '[gone](missing.md) [no anchor](other.md#nowhere) [here](#nowhere-here)',
          '[web](https://example.org/x.md) `[code](not-a-link.md)`',
          '',
          '```md',
          '[in a fence](also-not-a-link.md)',
          '```'
        ].join('\n')
      );
      expect(brokenLinks([page]).map(b => b.replace(dir, ''))).toEqual([
        '/page.md: missing.md (no such file)',
        '/page.md: other.md#nowhere (no such heading)',
        '/page.md: #nowhere-here (no such heading)'
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The links of `files` that lead nowhere, as `file: target (why)`. */
function brokenLinks(files: string[]): string[] {
  const broken: string[] = [];
  for (const file of files) {
    for (const link of linksOf(fs.readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) {
        continue; // https:, mailto: ...: not this repository's
      }
      const [target, anchor] = splitAnchor(link);
      const resolved = target ? path.resolve(path.dirname(file), target) : file;
      if (!fs.existsSync(resolved)) {
        broken.push(`${file}: ${link} (no such file)`);
      } else if (
        anchor !== undefined &&
        !anchorsOf(fs.readFileSync(resolved, 'utf8')).has(
          decodeURIComponent(anchor)
        )
      ) {
        broken.push(`${file}: ${link} (no such heading)`);
      }
    }
  }
  return broken;
}

function splitAnchor(link: string): [string, string | undefined] {
  const hash = link.indexOf('#');
  return hash < 0
    ? [link, undefined]
    : [link.slice(0, hash), link.slice(hash + 1)];
}

/** The lines of a markdown page outside its fenced code blocks. */
function outsideFences(markdown: string): string[] {
  const lines: string[] = [];
  let fence: string | null = null;
  for (const line of markdown.split('\n')) {
    const opener = /^\s*(```+|~~~+)/.exec(line);
    if (fence === null && opener) {
      fence = opener[1];
    } else if (fence !== null) {
      if (line.trim().startsWith(fence)) {
        fence = null;
      }
    } else {
      lines.push(line);
    }
  }
  return lines;
}

/** Markdown without its code blocks and inline code spans, where nothing is a link. */
function prose(markdown: string): string[] {
  return outsideFences(markdown).map(line => line.replace(/(`+)[^`]*?\1/g, ''));
}

/** The targets of inline links and images, and of reference definitions. */
function linksOf(markdown: string): string[] {
  const links: string[] = [];
  for (const line of prose(markdown)) {
    for (const m of line.matchAll(
      /\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g
    )) {
      links.push(m[1]);
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
    if (definition) {
      links.push(definition[1]);
    }
  }
  return links;
}

/**
 * The anchors GitHub gives a page's headings: the heading's text, lower case, without punctuation
 * or symbols (hyphens and underscores stay), each space a hyphen, `-1`, `-2`... on repeats.
 * (github-slugger does this; it ships only as an ES module, which jest here would need compiled.)
 */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of markdownHeadings(markdown)) {
    const text = line
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/[`*]/g, '')
      .replace(/<[^>]+>/g, '');
    const slug = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug);
    seen.set(slug, (count ?? -1) + 1);
    anchors.add(count === undefined ? slug : `${slug}-${count + 1}`);
  }
  for (const m of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) {
    anchors.add(m[1]);
  }
  return anchors;
}

function markdownHeadings(markdown: string): string[] {
  return outsideFences(markdown)
    .map(line => /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1])
    .filter((heading): heading is string => heading !== undefined);
}
