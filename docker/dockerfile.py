"""docker/Dockerfile read as data: its stages and the instructions that the
checks in docker/check_build.py and docker/check_compose.py compare with the
tree, the compose file and kcache-server's option table.

Only what this project's Dockerfile uses is understood: comments, line
continuations, FROM ... AS, COPY (with --from), ENV KEY=VALUE pairs, EXPOSE,
VOLUME (JSON or plain), HEALTHCHECK ... CMD and RUN.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (KEYWORD, arguments)

    def args(self, keyword: str) -> list[str]:
        return [a for k, a in self.instructions if k == keyword]

    def copies(self) -> list[tuple[list[str], str]]:
        """(sources, destination) of each COPY from the build context (not --from)."""
        out = []
        for a in self.args("COPY"):
            words = shlex.split(a)
            if any(w.startswith("--from") for w in words):
                continue
            words = [w for w in words if not w.startswith("--")]
            out.append((words[:-1], words[-1]))
        return out

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for a in self.args("ENV"):
            for word in shlex.split(a):
                key, sep, value = word.partition("=")
                if not sep:
                    raise ValueError(f"ENV {a!r}: only KEY=VALUE pairs are understood")
                out[key] = value
        return out

    def exposed_ports(self) -> set[int]:
        return {int(p.split("/")[0]) for a in self.args("EXPOSE") for p in a.split()}

    def volumes(self) -> set[str]:
        out: set[str] = set()
        for a in self.args("VOLUME"):
            out.update(json.loads(a) if a.lstrip().startswith("[") else a.split())
        return out

    def healthcheck_command(self) -> str | None:
        checks = self.args("HEALTHCHECK")
        if not checks:
            return None
        _, sep, command = checks[-1].partition("CMD")
        return command.strip() if sep else None

    def cmake_build(self) -> tuple[list[str], list[str]]:
        """The -D options of the RUN that configures with cmake, and the
        targets it builds."""
        for run in self.args("RUN"):
            if "cmake -S" not in run:
                continue
            words = shlex.split(run.replace("&&", " && "))
            defines = [w for w in words if w.startswith("-D")]
            i = words.index("--target")
            targets = []
            for w in words[i + 1:]:
                if w.startswith("-") or w == "&&":
                    break
                targets.append(w)
            return defines, targets
        raise ValueError("no RUN cmake -S ... in the stage")


def logical_lines(text: str) -> list[str]:
    """Instructions with continuations joined and comment lines dropped."""
    out, current = [], ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        if current.strip():
            out.append(re.sub(r"\s+", " ", current.strip()))
        current = ""
    if current.strip():
        out.append(current.strip())
    return out


def parse(path: Path) -> list[Stage]:
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical_lines(path.read_text()):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif stages:
            stages[-1].instructions.append((keyword, rest))
    return stages


def stage(stages: list[Stage], name: str | None) -> Stage:
    """The stage called `name`; None: the last one (the image)."""
    if name is None:
        return stages[-1]
    for s in stages:
        if s.name == name:
            return s
    raise KeyError(f"no stage {name!r} in the Dockerfile")
