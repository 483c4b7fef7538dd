#!/usr/bin/env python3
"""Check that every relative link in the Markdown files given resolves in
the repository: the file or directory exists, and an #anchor names a
heading of the target (GitHub's slug rules)."""
import os, re, sys

def slug(h):
    h = h.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)   # drop punctuation, keep word chars, '-', ' '
    return h.replace(' ', '-')

def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
        if not fence and (m := re.match(r'#{1,6} (.*)', line)):
            out.add(slug(m.group(1)))
    return out

bad = 0
for md in sys.argv[1:]:
    text = open(md, encoding="utf-8").read()
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', target):
            continue
        path, _, frag = target.partition('#')
        full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(full):
            print(f'{md}: {target}: no such file'); bad += 1
        elif frag and full.endswith('.md') and frag not in anchors(full):
            print(f'{md}: {target}: no heading #{frag}'); bad += 1
sys.exit(1 if bad else 0)
