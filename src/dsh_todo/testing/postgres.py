"""A throwaway PostgreSQL cluster, for tests, benchmarks and trying the PostgreSQL backend out.

``initdb`` into a temporary directory, then ``pg_ctl start`` on a free loopback port with the socket in that directory
too; :meth:`Cluster.stop` stops it and deletes everything. It starts in about a second. Running as root, the server
runs as the ``postgres`` user (else ``nobody``), because PostgreSQL refuses to run as root: this is why the rig is
ours and not pytest-postgresql's, whose executor calls ``pg_ctl`` as the current user (decision 0006). The binaries
are looked for on ``$PATH`` and then in Debian's ``/usr/lib/postgresql/<version>/bin``.

``durable=False`` turns off ``fsync`` and friends: right for tests, wrong for measuring commit latency. Only the
standard library is imported; the caller connects with whatever client it likes (``psycopg``, the ``postgres``
extra, for ours).

    with start_cluster(durable=False) as cluster:
        ctx = open_runtime(database=cluster.url)
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_todo.harness.errors import ClusterUnavailable as ClusterUnavailable

__all__ = ["Cluster", "ClusterUnavailable", "start_cluster"]




def find_bindir() -> Path | None:
    """Where ``initdb``/``pg_ctl`` live: ``$PATH`` first, then Debian's versioned directories, newest first."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent

    def version(path: str) -> int:
        name = Path(path).parent.name
        return int(name) if name.isdigit() else 0

    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Cluster:
    """A running throwaway cluster: ``url`` connects as its superuser ``dsh`` (trust auth, loopback only)."""

    url: str
    directory: Path
    bindir: Path
    user: Any = None

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            kwargs.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(self.directory)}
        return subprocess.run([str(self.bindir / args[0]), *args[1:]], cwd=self.directory, env=env, text=True,
                              capture_output=True, check=check, timeout=60, **kwargs)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.run("pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_cluster(*, durable: bool = True, max_connections: int = 300) -> Cluster:
    """Start a throwaway cluster, or raise :class:`ClusterUnavailable` saying why it cannot be done here."""
    bindir = find_bindir()
    if bindir is None:
        raise ClusterUnavailable("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in "
                                 "/usr/lib/postgresql/*/bin; install Debian's postgresql package")
    user = None
    if os.geteuid() == 0:
        for name in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                user = pwd.getpwnam(name)
                break
        if user is None:
            raise ClusterUnavailable("running as root with neither a 'postgres' nor a 'nobody' user to run the "
                                     "server as")
    directory = Path(tempfile.mkdtemp(prefix="dsh-todo-pg-"))
    if user is not None:
        os.chown(directory, user.pw_uid, user.pw_gid)
    cluster = Cluster("", directory, bindir, user)
    try:
        cluster.run("initdb", "-D", str(directory / "data"), "-U", "dsh", "--auth=trust", "-E", "UTF8",
                    "--no-locale", "--no-sync")
        settings = f"-c listen_addresses=127.0.0.1 -k {directory} -c max_connections={max_connections}"
        if not durable:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        last = ""
        for _attempt in range(5):  # another process may take the free port between our probe and the bind
            port = _free_port()
            started = cluster.run("pg_ctl", "-D", str(directory / "data"), "-l", str(directory / "server.log"),
                                  "-w", "-t", "60", "-o", f"{settings} -p {port}", "start", check=False)
            if started.returncode == 0:
                cluster.url = f"postgresql://dsh@127.0.0.1:{port}/postgres"
                return cluster
            log = directory / "server.log"
            last = log.read_text(errors="replace")[-2000:] if log.exists() else started.stderr
        raise RuntimeError(f"the throwaway PostgreSQL cluster did not start:\n{last}")
    except BaseException:
        cluster.stop()
        raise
