"""How fast ``dsh-todo run``, ``acp`` and ``web`` are gone after SIGTERM, SIGINT or SIGHUP (issue 21, issue 22 item 9).

For each command and signal, interleaved, the time from the signal to the process's exit: ``run`` with its model
request in flight (a loopback endpoint that never answers; the turn ends ``aborted``), ``acp`` with a prompt in
flight the same way, ``web`` serving. Medians and maxima over the runs; wall-clock times on this machine, so run it on
a quiet one. (``dsh-todo mcp``'s are in ``mcp_lifecycle.py``.)

    uv run python benchmarks/stop_signals.py --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP}


def spawn(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", *argv], cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def in_flight(server: socket.socket) -> socket.socket:
    """The first model request's connection, once its head has arrived."""
    conn, _ = server.accept()
    received = b""
    while b"\r\n\r\n" not in received:
        received += conn.recv(65536)
    return conn


def gone(process: subprocess.Popen[bytes], signum: int, expected: int) -> float:
    start = time.perf_counter()
    process.send_signal(signum)
    code = process.wait(30)
    elapsed = time.perf_counter() - start
    if code != expected:
        raise RuntimeError(f"exit {code}, expected {expected}")
    return elapsed


def run(tmp: Path, signum: int) -> float:
    with socket.create_server(("127.0.0.1", 0)) as server:
        env = {**os.environ, "DEEPSEEK_API_KEY": "k",
               "DEEPSEEK_BASE_URL": f"http://127.0.0.1:{server.getsockname()[1]}/v1"}
        process = spawn(["run", "--root", str(tmp / "sessions"), "plan"], tmp, env)
        with in_flight(server):
            return gone(process, signum, 128 + signum)


def acp(tmp: Path, signum: int) -> float:
    with socket.create_server(("127.0.0.1", 0)) as server:
        env = {**os.environ, "DEEPSEEK_API_KEY": "k",
               "DEEPSEEK_BASE_URL": f"http://127.0.0.1:{server.getsockname()[1]}/v1"}
        process = spawn(["acp", "--root", str(tmp / "sessions")], tmp, env)
        assert process.stdin is not None and process.stdout is not None
        lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
                 {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp), "mcpServers": []}}]
        for line in lines:
            process.stdin.write(json.dumps(line).encode() + b"\n")
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": answer["result"]["sessionId"], "prompt": [{"type": "text", "text": "plan"}]}}
        process.stdin.write(json.dumps(prompt).encode() + b"\n")
        process.stdin.flush()
        with in_flight(server):
            return gone(process, signum, 0)


def web(tmp: Path, signum: int) -> float:
    process = spawn(["web", "--port", "0", "--root", str(tmp / "sessions")], tmp, dict(os.environ))
    assert process.stdout is not None
    process.stdout.readline()
    return gone(process, signum, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    commands = {"run (turn in flight)": run, "acp (prompt in flight)": acp, "web": web}
    times: dict[tuple[str, str], list[float]] = {(c, s): [] for c in commands for s in SIGNALS}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.runs):
            for command, measure in commands.items():
                for name, signum in SIGNALS.items():
                    where = Path(folder) / f"{index}-{name}-{command.split()[0]}"
                    where.mkdir()
                    times[command, name].append(measure(where, signum))
    print(f"load {os.getloadavg()[0]:.2f}, {args.runs} runs each")
    for (command, name), samples in times.items():
        print(f"{command}, {name} to exit: median {statistics.median(samples) * 1000:.1f} ms, "
              f"max {max(samples) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
