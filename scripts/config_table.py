"""The compiler-configuration table, generated from the code
(kcache._torch_adaptor.config_table and global_flags): one JSON file per
torch release under docs/config-table/, and the section of docs/keys.md
between its markers, rendered from every committed JSON file.

    .venv/bin/python scripts/config_table.py           # writes this torch's JSON, re-renders docs/keys.md
    .venv/bin/python scripts/config_table.py --check   # exit 1 where either differs from the code

tests/python/compile/test_config_table.py runs the check.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "compile"))
TABLES = ROOT / "docs" / "config-table"
KEYS_MD = ROOT / "docs" / "keys.md"
BEGIN, END = "<!-- config-table:begin (scripts/config_table.py) -->", "<!-- config-table:end -->"


def table() -> dict:
    """This torch's table."""
    import torch

    from kcache._torch_adaptor import config_table, global_flags, releases

    entries = [{"entry": f"{r.module}.{r.name}", "class": r.cls or "UNCLASSIFIED", "reason": r.reason}
               for r in config_table.rows()]
    fields = global_flags.guard_fields()
    flags = [{"field": f, "class": global_flags.GUARD_FIELDS.get(f, ("UNCLASSIFIED", ""))[0],
              "reason": global_flags.GUARD_FIELDS.get(f, ("", "not classified"))[1]} for f in fields]
    return {"release": releases.release_of(torch.__version__), "torch": torch.__version__,
            "modules": config_table.MODULES, "entries": entries, "global_state": flags}


def _decided(rows: list[dict]) -> dict[tuple[str, str], list[str]]:
    """(class, reason) -> entries, for every row that is not a portable key."""
    out: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for r in rows:
        if not (r["class"] == "key" and r["reason"] == "portable"):
            reason = "alias of another entry" if r["class"] == "alias" else r["reason"]
            out[(r["class"], reason)].append(r["entry"])
    return out


def render(tables: list[dict]) -> str:
    lines = [BEGIN, "", "Entries per class and module, per torch release (from docs/config-table/<release>.json):", ""]
    lines += ["| release | module | key (portable) | key (kcache) | neutral | alias | unclassified |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in tables:
        count: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for r in t["entries"]:
            module = r["entry"].split(".")[0]
            cls = r["class"] if r["class"] != "key" else ("key (portable)" if r["reason"] == "portable" else "key (kcache)")
            count[module][cls] += 1
        for module in t["modules"]:
            c = count.get(module, collections.Counter())
            lines.append(f"| {t['release']} | `{t['modules'][module]}` | {c['key (portable)']} | {c['key (kcache)']} "
                         f"| {c['neutral']} | {c['alias']} | {c['UNCLASSIFIED']} |")
    newest = tables[-1]
    lines += ["", f"Every entry that is not a portable key, torch {newest['release']}:", "",
              "| class | reason | entries |", "| --- | --- | --- |"]
    for (cls, reason), names in sorted(_decided(newest["entries"]).items()):
        lines.append(f"| {cls} | {reason} | {', '.join(f'`{n}`' for n in sorted(names))} |")
    lines += ["", f"Process-global state (Dynamo's GlobalStateGuard fields), torch {newest['release']}:", "",
              "| field | class | how |", "| --- | --- | --- |"]
    for f in newest["global_state"]:
        lines.append(f"| `{f['field']}` | {f['class']} | {f['reason']} |")
    return "\n".join(lines + ["", END])


def committed() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(TABLES.glob("*.json"))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    now = table()
    path = TABLES / f"{now['release']}.json"
    text = json.dumps(now, indent=1) + "\n"
    doc = KEYS_MD.read_text()
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    if args.check:
        problems = []
        if not path.exists() or json.loads(path.read_text())["entries"] != now["entries"] \
                or json.loads(path.read_text())["global_state"] != now["global_state"]:
            problems.append(f"{path.relative_to(ROOT)} is not this torch's table (run scripts/config_table.py)")
        if head + render(committed()) + tail != doc:
            problems.append("docs/keys.md's config table is not rendered from docs/config-table/")
        print("\n".join(problems) or "config table: up to date")
        return 1 if problems else 0
    TABLES.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    KEYS_MD.write_text(head + render(committed()) + tail)
    print(f"wrote {path.relative_to(ROOT)} and docs/keys.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
