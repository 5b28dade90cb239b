#!/usr/bin/env python3
"""Lists functions longer than a limit (default 60 lines) in C++ files.

A brace-counting scan: a function body is a top-level-ish '{' whose preceding text ends in
')' (optionally followed by qualifiers, an initializer list or a trailing return type), not
inside a class/namespace/struct/enum/lambda-less initializer. Lambdas are counted within
their enclosing function. Usage: long-functions.py [--max N] FILE...
"""
import re
import sys


def strip(text):
    # Comments, strings and chars blanked out, newlines kept.
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append('""' + '\n' * text.count('\n', i, end))
            i = end
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


SCOPE = re.compile(r'\b(namespace|class|struct|enum|union)\b[^;{}()]*$')


def functions(path):
    text = strip(open(path).read())
    stack = []  # (kind, start_line, name)
    line = 1
    last = 0  # index after the last ';', '{' or '}'
    for i, c in enumerate(text):
        if c == '\n':
            line += 1
        elif c == '{':
            head = text[last:i].strip()
            in_function = any(k == 'fn' for k, _, _ in stack)
            if in_function:
                kind = 'inner'
            elif SCOPE.search(head) or head.endswith('=') or head == '' or head.endswith(','):
                kind = 'scope'
            elif re.search(r'\)\s*(const|override|final|noexcept|mutable|->[^{]*|:[^{]*|'
                           r'BATON_[A-Z_]+\([^)]*\)|\s)*$', head):
                kind = 'fn'
            else:
                kind = 'scope'
            name = re.sub(r'\s+', ' ', head)[-90:]
            stack.append((kind, line, name))
            last = i + 1
        elif c == '}':
            if stack:
                kind, start, name = stack.pop()
                if kind == 'fn':
                    yield (line - start + 1, start, name)
            last = i + 1
        elif c == ';':
            last = i + 1


def main():
    args = sys.argv[1:]
    limit = 60
    if args[:1] == ['--max']:
        limit, args = int(args[1]), args[2:]
    found = 0
    for path in args:
        for length, start, name in functions(path):
            if length > limit:
                found += 1
                print(f'{path}:{start}: {length} lines: {name}')
    print(f'{found} function(s) over {limit} lines in {len(args)} file(s)')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
