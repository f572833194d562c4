"""Start and stop a real ZooKeeper (standalone or a 3-server ensemble) from pyspark's bundled jars.

Used by the tests, the demo and the benchmarks: a genuine ZooKeeper 3.9 server, not a fake.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Self

from migrate.atomic import atomic_write_text
from migrate.errors import Zk2KraftError

# Jars ZooKeeperServerMain / QuorumPeerMain need at run time (names without version).
_REQUIRED_JARS = ("zookeeper", "zookeeper-jute", "slf4j-api")
_OPTIONAL_JARS = (
    "log4j-slf4j2-impl",
    "log4j-api",
    "log4j-core",
    "netty-handler",
    "netty-common",
    "netty-buffer",
    "netty-transport",
    "netty-codec",
    "netty-codec-base",
    "netty-resolver",
    "netty-transport-native-unix-common",
    "netty-transport-classes-epoll",
    "metrics-core",
    "snappy-java",
    "commons-io",
    "commons-cli",
)

# C1-only JIT, serial GC and a small heap start the JVM in about half a second.
_FAST_JVM_OPTIONS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.net.preferIPv4Stack=true",
)

_LOG4J2_TEMPLATE = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %-5p [%t] %c{{1}}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""

_LIVE: set[_ServerProcess] = set()


@atexit.register
def _stop_leftovers() -> None:
    # A crashed or interrupted test run must not leave JVMs behind.
    leftovers = list(_LIVE)
    for proc in leftovers:
        proc.terminate()
    for proc in leftovers:
        proc.stop(timeout=3.0)


def java_executable() -> str:
    """Path of `java` on PATH, or a Zk2KraftError telling the user to install a JRE."""
    java = shutil.which("java")
    if java is None:
        raise Zk2KraftError(
            "cannot start an embedded ZooKeeper: `java` is not on PATH; install a Java runtime "
            "(JRE 11 or newer, e.g. `make java` or `apt-get install default-jre-headless`)"
        )
    return java


def pyspark_jars_dir() -> Path:
    """The `jars/` folder of the installed pyspark, which bundles ZooKeeper 3.9 and its dependencies."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise Zk2KraftError(
            "cannot start an embedded ZooKeeper: pyspark (which ships its jars) is not installed"
        )
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not jars.is_dir():
        raise Zk2KraftError(f"cannot start an embedded ZooKeeper: pyspark has no jars folder at {jars}")
    return jars


def zookeeper_classpath(jars_dir: Path | None = None) -> list[Path]:
    """The jars (from pyspark) that a ZooKeeper server needs, newest version of each."""
    folder = jars_dir or pyspark_jars_dir()
    names = sorted(p.name for p in folder.glob("*.jar"))
    found: list[Path] = []
    for base in (*_REQUIRED_JARS, *_OPTIONAL_JARS):
        pattern = re.compile(re.escape(base) + r"-\d[\w.\-]*\.jar")
        matches = [n for n in names if pattern.fullmatch(n)]
        if not matches:
            if base in _REQUIRED_JARS:
                raise Zk2KraftError(f"cannot start an embedded ZooKeeper: no {base}-*.jar in {folder}")
            continue
        found.append(folder / matches[-1])
    return found


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that were free a moment ago (all held open while choosing)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


def port_in_use(port: int) -> bool:
    """True when something on 127.0.0.1 already listens on `port`."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def four_letter_word(port: int, command: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (`srvr`, `ruok`, `mntr`...) and return the reply ('' if none)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(command.encode("ascii"))
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(port: int) -> str | None:
    """`standalone`, `leader` or `follower` as `srvr` reports it, or None while not serving."""
    match = re.search(r"^Mode: (\S+)", four_letter_word(port, "srvr"), re.MULTILINE)
    return match.group(1) if match else None


def super_digest(user: str, password: str) -> str:
    """ZooKeeper's digest form `user:base64(sha1(user:password))`, as used in digest ACLs and superDigest."""
    digest = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(digest).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files a TLS client needs: CA to trust, and a client certificate/key signed by that CA."""

    ca: Path
    client_cert: Path
    client_key: Path


def _generate_tls_files(folder: Path) -> tuple[TlsFiles, Path]:
    """A throw-away CA, a server PEM (key + cert for 127.0.0.1/localhost) and a client cert/key."""
    folder.mkdir(parents=True, exist_ok=True)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise Zk2KraftError("cannot enable TLS for the embedded ZooKeeper: `openssl` is not on PATH")

    def run(*args: str) -> None:
        done = subprocess.run([openssl, *args], cwd=folder, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise Zk2KraftError(
                f"openssl {args[0]} failed while making test certificates: {done.stderr.strip()}"
            )

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "3650",
        "-subj",
        "/CN=zk2kraft-test-ca",
    )
    san = folder / "san.ext"
    san.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
        )
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "3650",
            "-extfile",
            str(san),
        )
    server_pem = folder / "server.pem"
    server_pem.write_text((folder / "server.key").read_text() + (folder / "server.crt").read_text())
    return TlsFiles(folder / "ca.pem", folder / "client.crt", folder / "client.key"), server_pem


def _render_config(values: Mapping[str, object]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


class _ServerProcess:
    """One ZooKeeper JVM: its folder (config, log, data), process and four-letter-word port."""

    def __init__(
        self,
        folder: Path,
        main_class: str,
        config: Mapping[str, object],
        jvm_options: Sequence[str],
        client_port: int,
    ) -> None:
        self.folder = folder
        self.main_class = main_class
        self.config = dict(config)
        self.jvm_options = list(jvm_options)
        self.client_port = client_port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.folder / "zookeeper.log"

    @property
    def console_path(self) -> Path:
        return self.folder / "zookeeper.out"

    @property
    def config_path(self) -> Path:
        return self.folder / "zoo.cfg"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self) -> None:
        """Write config files and spawn the JVM (does not wait for it to serve)."""
        if self.running:
            return
        java = java_executable()
        if port_in_use(self.client_port):
            raise Zk2KraftError(
                f"cannot start ZooKeeper in {self.folder}: port {self.client_port} on 127.0.0.1 is already in use"
            )
        classpath = os.pathsep.join(str(p) for p in zookeeper_classpath())
        (self.folder / "data").mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config_path, _render_config(self.config))
        log4j = self.folder / "log4j2.properties"
        atomic_write_text(log4j, _LOG4J2_TEMPLATE.format(log=self.log_path))
        command = [
            java,
            *_FAST_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dzookeeper.log.dir={self.folder}",
            *self.jvm_options,
            "-cp",
            classpath,
            self.main_class,
            str(self.config_path),
        ]
        with open(self.console_path, "ab") as console:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, cwd=self.folder
            )
        _LIVE.add(self)

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `ready` until true; on exit or timeout raise with the tail of the server's log."""
        deadline = time.monotonic() + timeout
        while True:
            if ready():
                return
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise Zk2KraftError(
                    f"ZooKeeper in {self.folder} exited (code {code}) before {what}\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise Zk2KraftError(
                    f"ZooKeeper in {self.folder} did not reach {what} within {timeout:.0f}s\n{self.log_tail()}"
                )
            time.sleep(0.02)

    def terminate(self) -> None:
        """Send SIGTERM without waiting (lets several servers shut down in parallel)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if the JVM has not exited after `timeout` seconds."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.process = None
        _LIVE.discard(self)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server log and JVM console, for error messages."""
        parts = []
        for path in (self.console_path, self.log_path):
            if path.exists():
                text = path.read_text("utf-8", "replace").splitlines()[-lines:]
                if text:
                    parts.append(f"--- last lines of {path} ---\n" + "\n".join(text))
        return "\n".join(parts) or f"(no log written in {self.folder})"


def _base_config(data_dir: Path, client_port: int, tick_ms: int) -> dict[str, object]:
    return {
        "tickTime": tick_ms,
        "initLimit": 20,
        "syncLimit": 10,
        "dataDir": data_dir,
        "clientPort": client_port,
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
        "maxClientCnxns": 0,
        # No fsync per transaction: a throw-away server needs speed, and data still survives restarts.
        "forceSync": "no",
    }


class EmbeddedZooKeeper:
    """A standalone ZooKeeper 3.9 server on a free loopback port, with its data in `base_dir`.

    `config` adds or overrides zoo.cfg lines; `sasl_users` (name → password) enables SASL DIGEST-MD5
    through a generated JAAS file; `tls=True` adds a `secureClientPort` with generated PEM certificates
    (see `tls_files`); `super_password` sets the digest super user `super`. Without `base_dir` a temp
    folder is used and removed by `close()`.
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        config: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] = (),
        sasl_users: Mapping[str, str] | None = None,
        tls: bool = False,
        super_password: str | None = None,
        tick_ms: int = 500,
        startup_timeout: float = 30.0,
    ) -> None:
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="zk2kraft-zk-"))
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.startup_timeout = startup_timeout
        self.sasl_users = dict(sasl_users or {})
        self.tls_files: TlsFiles | None = None
        self.secure_port: int | None = None
        wanted = [port is None, tls]
        chosen = iter(free_ports(sum(wanted)))
        self.port = port if port is not None else next(chosen)
        values = _base_config(self.base_dir / "data", self.port, tick_ms)
        options = list(jvm_options)
        if sasl_users:
            values["authProvider.sasl"] = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
            options.append(f"-Djava.security.auth.login.config={self._write_jaas(sasl_users)}")
            # ZooKeeper 3.9 runs in "FIPS mode" by default, which refuses DIGEST-MD5.
            options.append("-Dzookeeper.fips-mode=false")
        if tls:
            self.secure_port = next(chosen)
            self.tls_files, server_pem = _generate_tls_files(self.base_dir / "tls")
            values.update(
                {
                    "secureClientPort": self.secure_port,
                    "secureClientPortAddress": "127.0.0.1",
                    "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                    "ssl.keyStore.location": server_pem,
                    "ssl.keyStore.type": "PEM",
                    "ssl.trustStore.location": self.tls_files.ca,
                    "ssl.trustStore.type": "PEM",
                    "ssl.hostnameVerification": "false",
                }
            )
        if super_password is not None:
            options.append(
                f"-Dzookeeper.DigestAuthenticationProvider.superDigest={super_digest('super', super_password)}"
            )
        values.update(config or {})
        self._server = _ServerProcess(
            self.base_dir, "org.apache.zookeeper.server.ZooKeeperServerMain", values, options, self.port
        )

    def _write_jaas(self, users: Mapping[str, str]) -> Path:
        entries = "".join(f'\n    user_{name}="{password}"' for name, password in users.items())
        path = self.base_dir / "jaas.conf"
        atomic_write_text(
            path,
            f"Server {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required{entries};\n}};\n",
        )
        return path

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def secure_connect_string(self) -> str:
        if self.secure_port is None:
            raise Zk2KraftError("this embedded ZooKeeper was started without tls=True")
        return f"127.0.0.1:{self.secure_port}"

    @property
    def data_dir(self) -> Path:
        """ZooKeeper's dataDir (holds `version-2/` snapshots and transaction logs)."""
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self._server.log_path

    @property
    def running(self) -> bool:
        return self._server.running

    def start(self) -> Self:
        """Start the JVM and wait until `srvr` reports it serving (raises with the log tail if not)."""
        self._server.launch()
        self._server.wait_until(
            lambda: server_mode(self.port) is not None, self.startup_timeout, "serving clients"
        )
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, SIGKILL after `timeout`); data stays for `restart()`/`start()`."""
        self._server.stop(timeout)

    def restart(self) -> None:
        """Stop and start again on the same port and data."""
        self.stop()
        self.start()

    def four_letter_word(self, command: str) -> str:
        return four_letter_word(self.port, command)

    def log_tail(self, lines: int = 30) -> str:
        return self._server.log_tail(lines)

    def close(self) -> None:
        """Stop the server and remove its folder when it was a temp folder."""
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class EmbeddedEnsemble:
    """A ZooKeeper ensemble of `size` QuorumPeerMain servers on loopback, folders under `base_dir`."""

    def __init__(
        self,
        size: int = 3,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        config: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] = (),
        tick_ms: int = 200,
        startup_timeout: float = 60.0,
    ) -> None:
        if size < 1:
            raise Zk2KraftError(f"an ensemble needs at least one server, not {size}")
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="zk2kraft-ensemble-"))
        self.startup_timeout = startup_timeout
        ports = free_ports(3 * size)
        self.client_ports = ports[:size]
        peers = {f"server.{i + 1}": f"127.0.0.1:{ports[size + i]}:{ports[2 * size + i]}" for i in range(size)}
        self._servers: list[_ServerProcess] = []
        for i in range(size):
            folder = self.base_dir / f"server{i + 1}"
            (folder / "data").mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder / "data" / "myid", f"{i + 1}\n")
            values = _base_config(folder / "data", self.client_ports[i], tick_ms)
            values.update({"reconfigEnabled": "false", "standaloneEnabled": "false", **peers})
            values.update(config or {})
            main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
            self._servers.append(_ServerProcess(folder, main, values, jvm_options, self.client_ports[i]))

    @property
    def size(self) -> int:
        return len(self._servers)

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.client_ports)

    def server_connect_string(self, index: int) -> str:
        return f"127.0.0.1:{self.client_ports[index]}"

    def server_dir(self, index: int) -> Path:
        return self._servers[index].folder

    def is_running(self, index: int) -> bool:
        return self._servers[index].running

    def mode(self, index: int) -> str | None:
        """`leader`/`follower` for a serving server, None otherwise."""
        return server_mode(self.client_ports[index]) if self._servers[index].running else None

    def start(self) -> Self:
        """Start every server together and wait for a quorum (one leader, everyone serving)."""
        for server in self._servers:
            server.launch()
        for i, server in enumerate(self._servers):
            server.wait_until(partial(self._serving, i), self.startup_timeout, "joining a quorum")
        self.wait_for_leader()
        return self

    def wait_for_leader(self, timeout: float | None = None) -> int:
        """Index of the leader once exactly one running server reports `Mode: leader`."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.startup_timeout)
        while time.monotonic() < deadline:
            leader = self.leader_index()
            if leader is not None:
                return leader
            time.sleep(0.05)
        tails = "\n".join(s.log_tail(10) for s in self._servers if s.running)
        raise Zk2KraftError(f"ZooKeeper ensemble in {self.base_dir} elected no leader\n{tails}")

    def leader_index(self) -> int | None:
        leaders = [i for i in range(self.size) if self.mode(i) == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def stop_server(self, index: int, timeout: float = 10.0) -> None:
        self._servers[index].stop(timeout)

    def start_server(self, index: int) -> None:
        """Start one stopped server and wait until it has rejoined (serves as leader or follower)."""
        server = self._servers[index]
        server.launch()
        server.wait_until(partial(self._serving, index), self.startup_timeout, "rejoining the quorum")

    def _serving(self, index: int) -> bool:
        return self.mode(index) is not None

    def stop(self) -> None:
        for server in self._servers:
            server.terminate()
        for server in self._servers:
            server.stop()

    def close(self) -> None:
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
