"""Pieces the controller handlers share: Kafka's ApiError, its default messages, broker checks, kio builders."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import functools
import inspect
import itertools
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import kio.schema.errors
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

# ClusterControlManager.isActive lives with the brokers; handlers keep importing it from here.
from bridge.brokers.cluster import ClusterControl
from bridge.brokers.partition_change import is_active as is_active
from bridge.brokers.replication import MAX_RECORDS_PER_USER_OP as MAX_RECORDS_PER_USER_OP
from migrate.kraft.image import MetadataImage

ZERO_UUID = uuid.UUID(int=0)
# Kafka's Uuid.METADATA_TOPIC_ID (Uuid(0, 1)): never handed out as a topic id.
METADATA_TOPIC_ID = uuid.UUID(int=1)
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


@functools.cache
def _default_messages() -> dict[str, str]:
    """Kafka's Errors messages, which kio keeps as the docstrings of its ErrorCode members."""
    tree = ast.parse(inspect.getsource(kio.schema.errors))
    messages: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ErrorCode":
            for stmt, following in itertools.pairwise(node.body):
                if (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    messages[stmt.targets[0].id] = following.value.value
    return messages


def default_message(code: ErrorCode) -> str:
    """Kafka's Errors.message() of an error code (the exception's default message)."""
    return _default_messages().get(code.name, code.name.upper())


@dataclass(frozen=True, slots=True)
class ApiError:
    """Kafka's ApiError: an error code and an optional message."""

    code: ErrorCode
    message: str | None = None

    @classmethod
    def of(cls, code: ErrorCode) -> ApiError:
        """`new ApiError(Errors.X)`: the message is the error's default message."""
        return cls(code, default_message(code))

    @classmethod
    def from_exception(cls, code: ErrorCode, message: str | None) -> ApiError:
        """ApiError.fromThrowable: no message for UNKNOWN_SERVER_ERROR or when it is the default one."""
        if code == ErrorCode.unknown_server_error or message == default_message(code):
            return cls(code, None)
        return cls(code, message)

    @property
    def is_failure(self) -> bool:
        return self.code != ErrorCode.none


NONE = ApiError(ErrorCode.none, None)
# EventHandlerExceptionInfo's answer to a BoundedListTooLongException: more than MAX_RECORDS_PER_USER_OP records.
TOO_LARGE = ApiError(ErrorCode.policy_violation, "Unable to perform excessively large batch operation.")


class KafkaApiException(Exception):
    """Raised inside a handler where Kafka throws an ApiException; turned into an ApiError by the caller."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.error = ApiError.from_exception(code, message)


def build(cls: type[Any], **values: Any) -> Any:
    """Instantiate a kio entity with the values its version has fields for; others are dropped."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(parent: type[Any], name: str) -> type[Any]:
    """The class of a nested entity declared in the same kio module as `parent`."""
    found = getattr(sys.modules.get(parent.__module__), name, None)
    if found is None:
        raise LookupError(f"{parent.__module__} has no entity {name}")
    return found  # type: ignore[no-any-return]


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> ApiError | None:
    """ClusterControlManager.checkBrokerEpoch, as the handlers' ApiError."""
    stale = ClusterControl.check_broker_epoch(image, broker_id, broker_epoch)
    return None if stale is None else ApiError(stale.code, stale.message)
