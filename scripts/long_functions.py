#!/usr/bin/env python3
"""Lists C++ function bodies longer than a limit (default 80 lines) in src/, cli/, include/ and python/.

A definition is a line at the start of a line or inside an unindented namespace whose text ends with
'{' after a ')' (or a constructor's initializer list), closed by the first '}' at the same
indentation. Lambdas and class bodies nested inside a function count towards that function.
Functions named in scripts/long_functions.allow (one 'path:function  # reason' per line) are
allowed; any other function over the limit, and any allowed one that is no longer long, makes the
exit status 1.
Usage: scripts/long_functions.py [--limit N] [--all]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START = re.compile(r'^(?P<indent>\s*)(?!(?:if|for|while|switch|return|else|do|namespace|struct|class|enum|union)\b)'
                   r'[A-Za-z_~][^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[^{]+)?\{\s*$')
NAME = re.compile(r'([A-Za-z_~][A-Za-z0-9_:~]*(?:operator\S+)?)\s*\(')


def functions(path):
    lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    i = 0
    while i < len(lines):
        if not START.match(lines[i]) or lines[i].lstrip().startswith('//'):
            i += 1
            continue
        # The signature may start on earlier lines: walk back until its parentheses balance.
        j, depth = i, 0
        while True:
            depth += lines[j].count(')') - lines[j].count('(')
            if depth <= 0 or j == 0:
                break
            j -= 1
        indent = re.match(r'\s*', lines[j]).group(0)
        first = lines[j].lstrip()
        if len(indent) > 2 or re.match(r'(if|for|while|switch|return|else|do|case|auto|const auto)\b', first) \
                or '=' in first.split('(')[0]:
            i += 1
            continue
        text = ' '.join(lines[j:i + 1])
        names = NAME.findall(text.split('(')[0] + '(')
        name = names[-1] if names else '?'
        k = i + 1
        while k < len(lines) and not (lines[k].startswith(indent + '}') and not lines[k].startswith(indent + ' ')):
            k += 1
        yield name, j + 1, k - j - 1
        i = k + 1


def main():
    limit = 80
    args = sys.argv[1:]
    if '--limit' in args:
        limit = int(args[args.index('--limit') + 1])
    allow = {}
    allow_path = os.path.join(ROOT, 'scripts', 'long_functions.allow')
    if os.path.exists(allow_path):
        for line in open(allow_path, encoding='utf-8'):
            key = line.split('#')[0].strip()
            if key:
                allow[key] = line.split('#', 1)[1].strip() if '#' in line else ''
    found = []
    for top in ('src', 'cli', 'include', 'python'):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith(('.cc', '.h')):
                    p = os.path.join(dirpath, f)
                    rel = os.path.relpath(p, ROOT)
                    for name, line, n in functions(p):
                        if n > limit:
                            found.append((n, rel, name, line))
    bad = 0
    seen = set()
    for n, rel, name, line in sorted(found, reverse=True):
        key = rel + ':' + name
        seen.add(key)
        tag = 'allowed' if key in allow else 'TOO LONG'
        if key not in allow:
            bad += 1
        if key not in allow or '--all' in args:
            print(f'{n:4d} lines  {rel}:{line}  {name}  [{tag}]')
    for key in allow:
        if key not in seen:
            print(f'stale allow entry (no longer over {limit} lines): {key}')
            bad += 1
    print(f'{len(found)} functions over {limit} lines, {len(found) - bad if bad <= len(found) else 0} allowed; '
          f'{bad} problem(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
