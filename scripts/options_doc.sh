#!/usr/bin/env bash
# Rewrites docs/operations.md's option list from kcache-server's option
# table (server/config.cpp); server_config_test fails while they differ.
#   scripts/options_doc.sh [build/dev/server/kcache-server]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/dev/server/kcache-server}
python3 - "$root/docs/operations.md" "$("$bin" --options-markdown)" <<'PY'
import sys, pathlib
page = pathlib.Path(sys.argv[1]); text = page.read_text()
begin = "<!-- options: begin (kcache-server --options-markdown) -->\n"; end = "<!-- options: end -->"
a, b = text.index(begin) + len(begin), text.index(end)
page.write_text(text[:a] + sys.argv[2] + "\n" + text[b:])
PY
