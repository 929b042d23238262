"""`habakkuk expose tailscale [--port 443] [--print]`, `habakkuk expose status`, `habakkuk
expose off` (spec 000 "Operations", Remote access).

`tailscale` runs `tailscale serve --bg --https=PORT http://127.0.0.1:<http port>`, which
shares the HTTP listener with the tailnet only; Habakkuk never runs `tailscale funnel`.
It refuses without http.token_env, since every device of the tailnet could reach the
API. `status` shows `tailscale serve status` and warns when Funnel is on; `off` stops
sharing the port.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.cli.common import current_home
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.config import HttpConfig

TAILSCALE = "tailscale"
TIMEOUT = 30.0  # seconds for one tailscale command
WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """`expose tailscale [--port N] [--print]`, `expose status`, `expose off [--port N]`."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    share = actions.add_parser("tailscale", help="share the listener with your tailnet")
    share.add_argument("--port", type=_port, default=443, help="the HTTPS port (default 443)")
    share.add_argument(
        "--print", action="store_true", help="print the tailscale command instead of running it"
    )
    actions.add_parser("status", help="what tailscale serve shares; warns when Funnel is on")
    off = actions.add_parser("off", help="stop sharing")
    off.add_argument("--port", type=_port, default=443, help="the HTTPS port (default 443)")


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(t("expose.bad_port", port=text))
    return int(text)


def main(args: argparse.Namespace) -> int:
    """Run the chosen action (the exit code)."""
    if args.action == "tailscale":
        return share(args.port, args.print)
    if args.action == "status":
        return status()
    return _run(
        [TAILSCALE, "serve", f"--https={args.port}", "off"], t("expose.off", port=args.port)
    )


def serve_command(http: HttpConfig, port: int) -> list[str]:
    """The tailscale command that shares the listener `http` on HTTPS port `port`."""
    host = "127.0.0.1" if http.host in WILDCARDS else http.host
    if ":" in host:
        host = f"[{host}]"
    return [TAILSCALE, "serve", "--bg", f"--https={port}", f"http://{host}:{http.port}"]


def share(port: int, print_only: bool) -> int:
    """`expose tailscale`: refused without http or its token; else tailscale serve."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.errors import BadInput

    config = load_config(current_home())
    if config.http is None:
        raise BadInput.said("expose.no_http")
    if not config.http.token_env:
        raise BadInput.said("expose.no_token")
    command = serve_command(config.http, port)
    if print_only:
        print(shlex.join(command))
        return EXIT_OK
    return _run(command, t("expose.shared", port=port))


def _tailscale(command: list[str]) -> tuple[int, str, str]:
    """Run a tailscale command: (exit code, stdout, stderr); BadInput when it is missing."""
    import shutil
    import subprocess

    from habakkuk.engine.errors import BadInput

    program = shutil.which(command[0])
    if program is None:
        raise BadInput.said("expose.no_tailscale")
    try:
        done = subprocess.run(
            [program, *command[1:]], capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return 1, "", t("expose.timeout", command=shlex.join(command), seconds=int(TIMEOUT))
    return done.returncode, done.stdout, done.stderr


def _run(command: list[str], done_line: str) -> int:
    code, out, err = _tailscale(command)
    if out.strip():
        print(out.rstrip())
    if code != 0:
        why = " ".join(err.split()) or t("expose.exit_code", code=code)
        print(
            f"habakkuk: {t('expose.failed', command=shlex.join(command), reason=why)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(done_line)
    return EXIT_OK


def _failed(command: list[str], code: int, err: str) -> int:
    """Say on stderr that a tailscale command failed, with its own words (EXIT_FAILED)."""
    why = " ".join(err.split()) or t("expose.exit_code", code=code)
    line = t("expose.failed", command=shlex.join(command), reason=why)
    print(f"habakkuk: {line}", file=sys.stderr)
    return EXIT_FAILED


def status() -> int:
    """`expose status`: each shared address and where it leads; a warning per Funnel."""
    import json

    command = [TAILSCALE, "serve", "status", "--json"]
    code, out, err = _tailscale(command)
    if code != 0:
        why = " ".join(err.split()) or t("expose.exit_code", code=code)
        print(
            f"habakkuk: {t('expose.failed', command=shlex.join(command), reason=why)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        state = json.loads(out or "{}")
    except ValueError:
        state = None
    if not isinstance(state, dict):
        print(f"habakkuk: {t('expose.bad_status')}", file=sys.stderr)
        return EXIT_FAILED
    shared = _shared(state)
    for address, target in shared:
        print(t("expose.shared_line", address=address, target=target))
    if not shared:
        print(t("expose.nothing"))
    funnel = state.get("AllowFunnel")
    for address, on in sorted(funnel.items() if isinstance(funnel, dict) else []):
        if on:
            print(t("expose.funnel_on", address=address), file=sys.stderr)
    return EXIT_OK


def _shared(state: dict[str, Any]) -> list[tuple[str, str]]:
    """(https://host:port/path, where it leads) for every web handler of the status."""
    found: list[tuple[str, str]] = []
    web = state.get("Web")
    for host_port, site in sorted(web.items() if isinstance(web, dict) else []):
        handlers = site.get("Handlers") if isinstance(site, dict) else None
        for path, handler in sorted(handlers.items() if isinstance(handlers, dict) else []):
            if not isinstance(handler, dict):
                continue
            target = handler.get("Proxy") or handler.get("Path") or handler.get("Text") or "?"
            found.append((f"https://{host_port}{path}", str(target)))
    return found
