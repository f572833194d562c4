"""`zk2kraft bridge stop`: find a running bridge on this host by its `/status`, SIGTERM it, wait for it to exit.

Kafka's counterpart is `kafka-server-stop.sh` (a SIGTERM to the process found by its command line); this one
finds the process through the bridge's own status endpoint, so it stops exactly the bridge that answers there.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bridge.metrics import BridgeStatus, ProcessStatus
from migrate.errors import UnreachableError, Zk2KraftError

PROGRESS_EVERY_S = 5.0
POLL_S = 0.1


def status_url(url: str) -> str:
    return url if url.rstrip("/").endswith("/status") else url.rstrip("/") + "/status"


def read_bridge_status(url: str) -> BridgeStatus:
    """GET and validate a bridge's `/status`; an error names the address."""
    target = status_url(url)
    try:
        with urllib.request.urlopen(target, timeout=10) as reply:
            body = json.loads(reply.read())
    except (urllib.error.URLError, OSError) as exc:
        raise UnreachableError(f"cannot read the bridge status at {target}: {exc}") from exc
    except ValueError as exc:
        raise Zk2KraftError(f"the bridge status at {target} is not JSON: {exc}") from exc
    return BridgeStatus.model_validate(body)


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
    status = read_bridge_status(url)
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
