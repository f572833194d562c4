"""ssl.principal.mapping.rules (Kafka's SslPrincipalMapper): the rules Kafka's own tests parse, refuse and apply,
and a TLS listener naming its callers by them (a certificate no rule maps is refused; the listener stays up)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kio.schema.metadata.v12 import MetadataRequest

from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.kafka.listener import KafkaListener
from bridge.kafka.protocol import KafkaPrincipal
from bridge.kafka.tls import SslPrincipalMapper, SslPrincipalMappingError
from migrate.errors import Zk2KraftError
from tests.support.listener import HOST, Cluster, serve
from tests.support.pki import Pki, client_context, needs_openssl, new_pki, server_context

KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])  # fmt: skip


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
        ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_the_first_rule_matching_the_whole_dn_names_the_principal(dn: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(KAFKA_RULES).name(dn) == name


@pytest.mark.parametrize(
    ("rules", "shown"),
    [
        ("", ""),
        ("DEFAULT", "DEFAULT"),
        ("RULE://", "RULE:/"),
        ("RULE:/.*/L", "RULE:/.*/L"),
        ("  RULE:// ,  DEFAULT  ", "RULE:/, DEFAULT"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT"),
        (",   , , ,      , , ,   ", ""),
        (",,RULE://,,,DEFAULT,,", "RULE:/, DEFAULT"),
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "RULE:\\**\\/+/*/L, RULE:\\/*\\**/**"),
    ],
)
def test_rules_split_as_kafka_splits_them(rules: str, shown: str) -> None:
    assert ", ".join(str(rule) for rule in SslPrincipalMapper.from_rules(rules).rules) == shown


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules_are_refused_naming_the_option(rules: str) -> None:
    with pytest.raises(Zk2KraftError, match="--mapping: invalid rule"):
        SslPrincipalMapper.from_rules(rules, "--mapping")


def test_replacements_follow_javas_syntax() -> None:
    # A comma escaped in the DN kept; a reference to a group the pattern lacks is literal text.
    escaped = SslPrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert escaped.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    assert SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=(.*?)$/$3$1/U").name("CN=a,OU=b") == "$3A"
    assert SslPrincipalMapper.from_rules("RULE:^CN=(?<n>.*)$/${n}-x/").name("CN=a") == "a-x"


def test_a_dn_no_rule_maps_is_an_error_naming_it() -> None:
    with pytest.raises(SslPrincipalMappingError, match="No rules apply to CN=x"):
        SslPrincipalMapper.from_rules("RULE:^CN=svc-(.*)$/$1/").name("CN=x")


# ------------------------------------------------------------------------------------------ on a listener


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("mapping-pki"))
    pki.issue("broker", "/O=acme/OU=brokers/CN=Kafka-1")
    pki.issue("stranger", "/O=elsewhere/CN=stranger")
    return pki


@pytest.fixture(scope="module")
def mapped(pki: Pki) -> Iterator[Cluster]:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=([^,]*),OU=brokers.*$/$1/L")
    listener = KafkaListener(
        HOST, 0, handlers={}, ssl_context=server_context(pki, "required"), principal_mapper=mapper
    )
    yield from serve(listener)


def metadata(port: int, pki: Pki, cert: str) -> None:
    async def scenario() -> None:
        connection = await KafkaConnection.open("localhost", port, ssl_context=client_context(pki, cert), timeout=10)
        async with connection:
            await connection.send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False), timeout=10)  # fmt: skip

    asyncio.run(scenario())


@needs_openssl
def test_a_tls_listener_names_callers_by_the_rules_and_refuses_a_certificate_they_do_not_map(
    mapped: Cluster, pki: Pki
) -> None:
    metadata(mapped.port, pki, "broker")
    assert mapped.principals[-1] == KafkaPrincipal("User", "kafka-1")
    seen = len(mapped.principals)
    with pytest.raises(ConnectionClosedError):
        metadata(mapped.port, pki, "stranger")
    assert len(mapped.principals) == seen
    metadata(mapped.port, pki, "broker")  # the listener still serves
    assert mapped.principals[-1] == KafkaPrincipal("User", "kafka-1")
