#!/usr/bin/env python3
"""A fake `docker` CLI for the docker sandbox's tests: it records every argument list (one
JSON line each in $FAKE_DOCKER_DIR/calls.jsonl), keeps the containers it was asked to make
in $FAKE_DOCKER_DIR/containers.json, and runs `docker exec`'s command here, as the real
one runs it in the container (with -i, its stdin is passed through)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STATE = Path(os.environ["FAKE_DOCKER_DIR"])


def load() -> dict[str, dict[str, object]]:
    path = STATE / "containers.json"
    return json.loads(path.read_text()) if path.exists() else {}


def save(containers: dict[str, dict[str, object]]) -> None:
    (STATE / "containers.json").write_text(json.dumps(containers))


def options(args: list[str], flags: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Split `--opt value` pairs (flags take none) from the positional rest."""
    found: dict[str, list[str]] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name = args[i]
        if name in flags:
            found.setdefault(name, []).append("")
            i += 1
        else:
            found.setdefault(name, []).append(args[i + 1])
            i += 2
    return found, args[i:]


def main(argv: list[str]) -> int:
    with open(STATE / "calls.jsonl", "a") as calls:
        calls.write(json.dumps(argv) + "\n")
    command, rest = argv[0], argv[1:]
    containers = load()
    if command == "inspect":
        name = rest[-1]
        if name not in containers:
            print(f"Error: No such object: {name}", file=sys.stderr)
            return 1
        found = containers[name]
        running = "true" if found["running"] else "false"
        print(f"{running} {found['label']}")
        return 0
    if command == "run":
        opts, positional = options(rest, {"-d", "--init"})
        name = opts["--name"][0]
        if name in containers:
            print(f"Conflict. The container name {name} is already in use", file=sys.stderr)
            return 125
        label = next(
            v.split("=", 1)[1] for v in opts["--label"] if v.startswith("habakkuk.settings=")
        )
        containers[name] = {"running": True, "label": label, "image": positional[0]}
        save(containers)
        print("0123456789ab")
        return 0
    if command == "rm":
        containers.pop(rest[-1], None)
        save(containers)
        return 0
    if command == "start":
        containers[rest[-1]]["running"] = True
        save(containers)
        return 0
    if command == "stop":
        containers[rest[-1]]["running"] = False
        save(containers)
        return 0
    if command == "exec":
        opts, positional = options(rest, {"-i", "-t"})
        name, program = positional[0], positional[1:]
        if not containers.get(name, {}).get("running"):
            print(f"Error: container {name} is not running", file=sys.stderr)
            return 1
        os.execvp(program[0], program)
    print(f"fake docker: unknown command {command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
