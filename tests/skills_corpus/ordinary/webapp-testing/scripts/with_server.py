"""Start a dev server, wait until its port answers, run a command, stop the server."""

import argparse
import shlex
import socket
import subprocess
import sys
import time


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("localhost", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"nothing answered on port {port} after {timeout:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="the command that starts the server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    server = subprocess.Popen(shlex.split(args.server))
    try:
        wait_for_port(args.port)
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return subprocess.call(command)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
