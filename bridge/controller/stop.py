"""`zk2kraft bridge stop`: find a running bridge on this host by its `/status`, SIGTERM it, wait for it to exit.

Kafka's counterpart is `kafka-server-stop.sh` (a SIGTERM to the process found by its command line); this one
finds the process through the bridge's own status endpoint, so it stops exactly the bridge that answers there.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from bridge.metrics import BridgeStatus, ProcessStatus, read_bridge_status, status_url
from migrate.errors import Zk2KraftError

PROGRESS_EVERY_S = 5.0
POLL_S = 0.1


def _alive(pid: int) -> bool:
    """Whether `pid` runs (an exited child its parent has not reaped yet counts as gone)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True


def running_bridge(url: str) -> tuple[BridgeStatus, ProcessStatus]:
    """The bridge answering at `url`, refused unless it is a bridge process alive on this host."""
    status = read_bridge_status(url, "--status")
    process = status.process
    if process is None:
        raise Zk2KraftError(f"the bridge at {status_url(url)} does not say its process id (an older zk2kraft?)")
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    if not _alive(process.pid) or (cmdline.exists() and b"bridge" not in cmdline.read_bytes()):
        raise Zk2KraftError(
            f"the bridge at {status_url(url)} runs as pid {process.pid}, which is not a bridge process on this "
            "host: run `zk2kraft bridge stop` on the bridge's own host"
        )
    return status, process


def stop_and_wait(process: ProcessStatus, timeout_s: float, say: Callable[[str], None]) -> float:
    """SIGTERM the bridge and wait until it has exited; seconds it took. A progress line every few seconds."""
    start = time.monotonic()
    try:
        os.kill(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return 0.0
    except PermissionError as exc:
        raise Zk2KraftError(f"cannot signal the bridge (pid {process.pid}): {exc}") from exc
    said = start
    while _alive(process.pid):
        now = time.monotonic()
        if now - start > timeout_s:
            raise Zk2KraftError(
                f"the bridge (pid {process.pid}) did not exit within {timeout_s:g} s of SIGTERM; it stops in "
                "bounded time on its own (see its log), or kill it and check its directory"
            )
        if now - said >= PROGRESS_EVERY_S:
            said = now
            say(f"waiting for the bridge (pid {process.pid}) to exit: {now - start:.0f} s")
        time.sleep(POLL_S)
    return time.monotonic() - start
