"""The handler registry: which modules serve which api keys, merged for the controller and the shim.

Kafka's counterpart is the api-key dispatch in ControllerApis.handle.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from bridge.api import ControllerHandler
from migrate.errors import Zk2KraftError

HANDLER_MODULES = (
    "bridge.handlers.topics",
    "bridge.handlers.alter_partition",
    "bridge.handlers.elect_leaders",
    "bridge.handlers.reassignments",
    "bridge.handlers.producer_ids",
    "bridge.handlers.configs",
    "bridge.handlers.quotas",
    "bridge.handlers.scram",
    "bridge.handlers.acls",
)


def load_handlers() -> tuple[dict[int, ControllerHandler], dict[int, tuple[int, int]]]:
    """Every handler module's HANDLERS and SUPPORTED, merged; a missing module is an installation error."""
    handlers: dict[int, ControllerHandler] = {}
    supported: dict[int, tuple[int, int]] = {}
    for name in HANDLER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            raise Zk2KraftError(
                f"request handler module {name} is missing: the zk2kraft installation is incomplete"
            ) from exc
        handlers.update(module.HANDLERS)
        supported.update(module.SUPPORTED)
    return handlers, supported


def response_error_code(response: Any) -> int:
    """The error a response reports for metrics: its top-level code, else the first failing item's."""
    code = getattr(response, "error_code", None)
    if code is not None and int(code) != 0:
        return int(code)
    for value in vars(response).values() if hasattr(response, "__dict__") else _slot_values(response):
        if isinstance(value, tuple):
            for item in value:
                item_code = getattr(item, "error_code", None)
                if item_code is not None and int(item_code) != 0:
                    return int(item_code)
    return int(code) if code is not None else 0


def _slot_values(obj: Any) -> list[Any]:
    return [getattr(obj, f.name) for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
