"""The receiver's check of a Baton webhook call, exactly as docs/webhooks.md shows it.

The Python block under "### Checking a call" in docs/webhooks.md is read from there and
run, so the example the documentation gives is the one the e2e suites check every call
with: verify(key, headers, raw_body, seen, now=None) returns "" for a call signed with
`key` within the replay window whose delivery id is new (remembering the id), else why
it is refused. `headers` by lowercase name; `raw_body` the bytes as received.
"""
import os
import re

_doc = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                         "webhooks.md"), encoding="utf-8").read()
_block = re.search(r"### Checking a call.*?```python\n(.*?)```", _doc, re.S)
if _block is None:
    raise SystemExit("docs/webhooks.md has no ```python block under \"### Checking a call\"")
exec(_block.group(1))
