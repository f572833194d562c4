"""The audit's SparkSession: `local[*]` by default or any `--master`, quiet logs, no UI, few shuffle partitions.

Executors run Python workers with this interpreter (`spark.pyspark.python`), so the project's modules
import the same way there. On a real cluster the inputs must be readable at the same paths on every
executor (a shared filesystem), because tasks open the files themselves.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_SHUFFLE_PARTITIONS = 8
DEFAULT_DRIVER_MEMORY = "1g"

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""


def _log4j_file() -> Path:
    """A log4j2 configuration that prints errors only (Spark's default prints warnings at every start)."""
    path = Path(tempfile.gettempdir()) / f"zk2kraft-audit-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return path


def _is_loopback(master: str) -> bool:
    return master.startswith("local") or "://127.0.0.1" in master or "://localhost" in master


def build_session(
    master: str | None = None,
    *,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    app_name: str = "zk2kraft audit",
    conf: dict[str, str] | None = None,
    java_options: str = "",
) -> SparkSession:
    """A new SparkSession (or the active one, which then keeps its own settings).

    `java_options` are added to the driver JVM's (e.g. `-XX:TieredStopAtLevel=1` for short runs).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    chosen = master or DEFAULT_MASTER
    # The JVM inherits this: Python workers on executors use the same interpreter and virtualenv.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = f"-Dlog4j2.configurationFile={_log4j_file().as_uri()}"
    driver_options = f"{log4j} {java_options}".strip()
    builder = (
        SparkSession.builder.appName(app_name)
        .master(chosen)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(max(2, shuffle_partitions)))
        .config("spark.driver.memory", driver_memory)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.extraJavaOptions", driver_options)
        .config("spark.executor.extraJavaOptions", log4j)
        .config("spark.sql.adaptive.enabled", "true")
    )
    if _is_loopback(chosen):
        # Stay on loopback: the host name may resolve to an address executors cannot reach.
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def spark_session(
    master: str | None = None,
    *,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> Iterator[SparkSession]:
    """A session for one audit: stopped afterwards unless it was already running (tests share one)."""
    existed = SparkSession.getActiveSession() is not None
    session = build_session(master, shuffle_partitions=shuffle_partitions, driver_memory=driver_memory)
    try:
        yield session
    finally:
        if not existed:
            session.stop()
