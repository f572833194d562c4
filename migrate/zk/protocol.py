"""ZooKeeper's wire vocabulary: op codes, special xids, result codes and jute's string and buffer.

One table for every module that speaks to ZooKeeper below kazoo's API: the live reader, the bridge's
leadership client and its multi codec. Kafka and ZooKeeper's counterparts: ZooDefs.OpCode,
KeeperException.Code and jute's BinaryOutputArchive.
"""

from __future__ import annotations

import struct

# ZooDefs.OpCode
OP_ERROR = -1
"""The op type of a failed request inside a multi reply."""
OP_CLOSE_SESSION = -11
OP_CREATE = 1
OP_DELETE = 2
OP_GET_DATA = 4
OP_SET_DATA = 5
OP_GET_ACL = 6
OP_GET_CHILDREN = 8
OP_SYNC = 9
OP_PING = 11
OP_CHECK = 13
OP_MULTI_READ = 22
OP_AUTH = 100
OP_ADD_WATCH = 106
OP_SASL = 102

# Special xids of ClientCnxn.
XID_WATCH = -1
XID_PING = -2
XID_AUTH = -4

# AddWatchMode
ADD_WATCH_PERSISTENT_RECURSIVE = 1

# Watcher.Event.EventType
EVENT_NODE_CREATED = 1
EVENT_NODE_DELETED = 2
EVENT_NODE_DATA_CHANGED = 3

# KeeperException.Code
OK = 0
SYSTEMERROR = -1
RUNTIMEINCONSISTENCY = -2
UNIMPLEMENTED = -6
NONODE = -101
NOAUTH = -102
BADVERSION = -103
NODEEXISTS = -110
NOTEMPTY = -111
AUTHFAILED = -115
SESSIONCLOSEDREQUIRESASL = -124
AUTH_CODES = frozenset({NOAUTH, AUTHFAILED, SESSIONCLOSEDREQUIRESASL})

CODE_NAMES = {
    OK: "OK",
    SYSTEMERROR: "SYSTEMERROR",
    RUNTIMEINCONSISTENCY: "RUNTIMEINCONSISTENCY",
    -3: "DATAINCONSISTENCY",
    -4: "CONNECTIONLOSS",
    -5: "MARSHALLINGERROR",
    UNIMPLEMENTED: "UNIMPLEMENTED",
    -7: "OPERATIONTIMEOUT",
    -8: "BADARGUMENTS",
    -100: "APIERROR",
    NONODE: "NONODE",
    NOAUTH: "NOAUTH",
    BADVERSION: "BADVERSION",
    -108: "NOCHILDRENFOREPHEMERALS",
    NODEEXISTS: "NODEEXISTS",
    NOTEMPTY: "NOTEMPTY",
    -112: "SESSIONEXPIRED",
    -114: "INVALIDACL",
    AUTHFAILED: "AUTHFAILED",
    -118: "SESSIONMOVED",
    -119: "NOTREADONLY",
    SESSIONCLOSEDREQUIRESASL: "SESSIONCLOSEDREQUIRESASL",
    -125: "QUOTAEXCEEDED",
    -127: "THROTTLEDOP",
}


def code_name(code: int) -> str:
    """ZooKeeper's name for a result code (`NODEEXISTS`), or the number when unknown."""
    return CODE_NAMES.get(code, str(code))


INT = struct.Struct(">i")
_NULL = INT.pack(-1)


def jute_string(text: str | None) -> bytes:
    """A jute ustring: UTF-8 length then bytes; None is `-1`."""
    if text is None:
        return _NULL
    raw = text.encode("utf-8")
    return INT.pack(len(raw)) + raw


def jute_buffer(data: bytes | None) -> bytes:
    """A jute buffer: length then bytes; None is `-1`."""
    return _NULL if data is None else INT.pack(len(data)) + data
