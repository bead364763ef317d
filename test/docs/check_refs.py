#!/usr/bin/env python3
"""
check_refs.py — every Markdown document the repository cites must exist, with the
section it names (doc/architecture.md, "Documents").

Scans the tracked text files (sources, build files, scripts, documents). A citation is a
path ending in ".md": resolved from the repository root, else from the citing file's
directory, it must name a tracked file. When it is followed by a section number
("doc/verbs.md 6", "doc/wire-roce.md sections 2-6", "doc/wire-iwarp.md 4.5-4.6") of a
document whose headings are numbered, every number given must be one of its headings
("## 6.", "### 4.5"); when it is followed
by a quoted title (doc/security.md, "Listener") some heading must contain that title.
Comment lines are joined first, so a title may wrap onto the next comment line.

Usage: check_refs.py [repository root]. Exit 0 when every citation resolves, 1 otherwise
(each failure printed as file:line: reason), 77 when the root is not a git work tree.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))

# Test data and generated trees cite nothing.
SKIP_PREFIXES = ('test/fuzz/corpus/', 'build')

REF = re.compile(r'(?<![\w./:-])((?:[\w.-]+/)*[\w-]+\.md)\b')
NUM = r'(\d+(?:\.\d+)*)'
SECTION = re.compile(r',?\s*(?:sections?\s+|§\s*)?' + NUM +
                     r'((?:\s*(?:-|,|and|/)\s*' + NUM + r')*)(?![\w.]*\d)')
TITLE = re.compile(r',?\s*"([^"]{1,80})"')
FOLLOW_NUM = re.compile(NUM)


def tracked_files():
    """The files git tracks under ROOT, or a sentence saying why there are none."""
    try:
        # Root running make check in a developer's clone is the README's quick start:
        # git's ownership check must not turn that into a skip.
        out = subprocess.run(['git', '-c', 'safe.directory=' + os.path.realpath(ROOT), '-C',
                              ROOT, 'ls-files', '-z'], check=True,
                             capture_output=True).stdout
    except OSError:
        return 'git is not installed'
    except subprocess.CalledProcessError:
        return '%s is not a git work tree' % ROOT
    return [p for p in out.decode().split('\0') if p and not p.startswith(SKIP_PREFIXES)]


def headings(path, cache={}):
    if path not in cache:
        hs = []
        with open(os.path.join(ROOT, path), encoding='utf-8') as f:
            for line in f:
                m = re.match(r'#{1,6}\s+(.*?)\s*$', line)
                if m:
                    hs.append(m.group(1))
        cache[path] = hs
    return cache[path]


def numbered(path):
    return any(re.match(r'\d+\.', h) for h in headings(path))


def has_number(path, num):
    return any(re.match(re.escape(num) + r'\.?(\s|$)', h) for h in headings(path))


def has_title(path, title):
    t = ' '.join(title.split()).lower()
    return any(t in ' '.join(h.split()).lower() for h in headings(path))


def joined(text):
    """The text with comment continuation lines joined by a space, and the offset at
    which each original line starts."""
    parts, starts, pos = [], [], 0
    for i, line in enumerate(text.split('\n')):
        m = re.match(r'\s*(?:\*(?!/)|//|#(?!#))\s?', line) if i else None
        piece = line[m.end():] if m else line
        sep = ' ' if i and m else ('\n' if i else '')
        parts.append(sep + piece)
        starts.append(pos + len(sep))
        pos += len(sep) + len(piece)
    return ''.join(parts), starts


def line_of(starts, off):
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= off:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def resolve(ref, citing, files):
    for base in ('', os.path.dirname(citing)):
        p = os.path.normpath(os.path.join(base, ref))
        if p in files:
            return p
    return None


def main():
    files = tracked_files()
    if isinstance(files, str):
        print('docs/check_refs: SKIPPED: %s; nothing to check' % files)
        return 77
    fileset = set(files)
    bad = 0
    for path in files:
        try:
            with open(os.path.join(ROOT, path), encoding='utf-8') as f:
                text = f.read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        if '.md' not in text:
            continue
        body, starts = joined(text)
        for m in REF.finditer(body):
            ref, where = m.group(1), '%s:%d' % (path, line_of(starts, m.start()))
            doc = resolve(ref, path, fileset)
            if not doc:
                print('%s: cites %s, which is not in the repository' % (where, ref))
                bad += 1
                continue
            rest = body[m.end():m.end() + 200]
            s = SECTION.match(rest) if numbered(doc) else None
            if s:
                nums = [s.group(1)] + FOLLOW_NUM.findall(s.group(2) or '')
                for n in nums:
                    if not has_number(doc, n):
                        print('%s: cites %s section %s, which %s has no heading for'
                              % (where, ref, n, doc))
                        bad += 1
                continue
            t = TITLE.match(rest)
            if t and not has_title(doc, t.group(1)):
                print('%s: cites %s "%s", which is no heading of %s'
                      % (where, ref, t.group(1), doc))
                bad += 1
    if bad:
        print('check_refs: %d citation(s) do not resolve' % bad)
        return 1
    print('check_refs: every cited document and section exists')
    return 0


if __name__ == '__main__':
    sys.exit(main())
