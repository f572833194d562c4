"""A Kafka tree only a digest user may read or write, as on a ZooKeeper whose Kafka znodes are ACL'd."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from migrate.zk.live import ZkConnectOptions

# A password distinctive enough that finding it anywhere in an output means it leaked.
USER, PASSWORD = "kafka", "zk-Secret-4711"
DIGEST = f"{USER}:{PASSWORD}"


def walk(client: KazooClient, path: str) -> list[str]:
    """`path` and every znode below it, parents first."""
    out = [path]
    for child in client.get_children(path):
        out.extend(walk(client, f"{path.rstrip('/')}/{child}"))
    return out


def only_digest_user(connect: str, chroot: str) -> None:
    """Every znode under the chroot readable and writable by the digest user only (Kafka's znodes ACL'd;
    the chroot itself, the operator's, stays open)."""
    client = ZkConnectOptions(connect=connect, auth_data=(("digest", DIGEST),)).start_client()
    try:
        for path in walk(client, chroot)[1:]:
            client.set_acls(path, [make_digest_acl(USER, PASSWORD, all=True)])
        assert client.get_acls(f"{chroot}/cluster/id")[0][0].id.scheme == "digest"
    finally:
        client.stop()
        client.close()


def files_holding(root: Path, secret: str) -> list[Path]:
    """The files under `root` whose bytes contain `secret`."""
    needle = secret.encode()
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]
