"""Stopping in bounded time: tasks cancelled until they end, blocking stops given a bound, and a last resort.

Kafka's counterpart is the shutdown of its event queues and network threads (`KafkaEventQueue.close`,
`ShutdownableThread`), each joined with a bound; a thread may stay in a ZooKeeper call while ZooKeeper is away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

CANCEL_RETRY_S: Final = 0.1


async def cancelled(task: asyncio.Future[Any], grace: float = 0.0) -> None:
    """Cancel `task` and wait until it has ended. It has `grace` s to finish what cancelling starts (handing
    something back), then is cancelled again while it goes on, since Python 3.11's `asyncio.wait_for` can
    swallow a cancellation that arrives as its inner call completes."""
    task.cancel()
    await asyncio.wait({task}, timeout=max(grace, CANCEL_RETRY_S))
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_RETRY_S)
    if not task.cancelled() and task.exception() is not None:
        log.debug("task %r ended with %r while being stopped", task, task.exception())


async def until(work: Any, ended: asyncio.Future[Any], grace: float = 0.0) -> None:
    """Run `work` until it ends (its exception propagates) or `ended` completes first; otherwise, and when
    this is cancelled, `work` is cancelled and waited for."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.wait({task, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            await cancelled(task, grace)
    if task.cancelled():
        return
    if ended.done():
        task.exception()  # it ended on its own as `ended` came: what it raised is not needed any more
        return
    task.result()


async def within(stop: Callable[[], Any], timeout: float, name: str) -> bool:
    """Run the blocking `stop` on a daemon thread; True if it returned (without error) within `timeout` s.

    Not on the loop's executor: a thread that never returns must not hold up the interpreter's exit.
    """
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[bool] = loop.create_future()

    def settle(ok: bool) -> None:
        if not finished.done():
            finished.set_result(ok)

    def run() -> None:
        ok = False
        try:
            stop()
            ok = True
        except Exception as exc:
            log.warning("%s failed: %s", name, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, ok)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(finished), timeout)
    except TimeoutError:
        return False


def exit_unless_done(seconds: float, code: int) -> threading.Timer:
    """The last resort of a foreground stop: if the process still runs `seconds` s from now, log what is still
    running and end it with `code` (the stop did not finish in bounded time, which is a defect)."""

    def expire() -> None:
        me = threading.current_thread()
        busy = sorted(t.name for t in threading.enumerate() if t.is_alive() and t is not me)
        log.error(
            "event=stop_deadline the stop did not finish within %.0f s; exiting with code %d (threads still "
            "running: %s)", seconds, code, ", ".join(busy),
        )  # fmt: skip
        logging.shutdown()
        os._exit(code)

    timer = threading.Timer(seconds, expire)
    timer.name, timer.daemon = "stop-deadline", True
    timer.start()
    return timer
