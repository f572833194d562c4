"""`controller.quorum.voters` read as Kafka 3.9 reads it (QuorumConfig.parseVoterConnections), and written back."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migrate.errors import InvalidRequestError, Zk2KraftError
from migrate.kraft.quorum_voters import (
    QuorumVoter,
    parse_quorum_voters,
    render_quorum_voters,
    voter_set,
)

HOST_CHARACTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-%._:"
WILDCARD_SPELLINGS = {"0", "0.0", "0.0.0", "0.0.0.0"}


@pytest.mark.parametrize(
    ("text", "voters"),
    [
        ("", ()),
        ("  \t", ()),
        ("1@kafka1:9092,2@kafka2:9092,3@kafka3:9092",
         (QuorumVoter(1, "kafka1", 9092), QuorumVoter(2, "kafka2", 9092), QuorumVoter(3, "kafka3", 9092))),
        ("1@127.0.0.1:9092", (QuorumVoter(1, "127.0.0.1", 9092),)),
        (" 3000@a:9093 ,\t3001@b:9093 ", (QuorumVoter(3000, "a", 9093), QuorumVoter(3001, "b", 9093))),
        ("1@[::1]:9093", (QuorumVoter(1, "::1", 9093),)),
        ("1@::1:9093", (QuorumVoter(1, "::1", 9093),)),  # the last colon separates the port
        ("1@CONTROLLER://ctrl:9093", (QuorumVoter(1, "ctrl", 9093),)),  # getHost skips a protocol prefix
        ("1@:9093", (QuorumVoter(1, "", 9093),)),  # an empty host matches Kafka's pattern
        ("1@ctrl:9093@", (QuorumVoter(1, "ctrl", 9093),)),  # String.split drops trailing empty parts
        ("+7@ctrl:009093", (QuorumVoter(7, "ctrl", 9093),)),  # Integer.parseInt: a sign, leading zeros
        ("-1@ctrl:0", (QuorumVoter(-1, "ctrl", 0),)),  # accepted by Kafka's syntax; refused by voter_set
        ("1@a:1,1@b:2", (QuorumVoter(1, "a", 1), QuorumVoter(1, "b", 2))),  # Kafka keeps the last silently
    ],
)  # fmt: skip
def test_what_kafka_accepts(text: str, voters: tuple[QuorumVoter, ...]) -> None:
    assert parse_quorum_voters(text) == voters


@pytest.mark.parametrize(
    ("text", "told"),
    [
        # KafkaConfigTest.testInvalidQuorumVoterConfig
        ("1", "entry '1': expected one '@'"),
        ("1@", "entry '1@': expected one '@'"),
        ("1:", "entry '1:'"),
        ("blah@", "entry 'blah@'"),
        ("1@kafka1", "entry '1@kafka1': what follows '@' is not HOST:PORT"),
        ("1@kafka1:9092,", "an empty entry (a comma too many)"),
        ("1@kafka1:9092,2", "entry '2'"),
        ("1@kafka1:9092,2@", "entry '2@'"),
        ("1@kafka1:9092,2@blah", "entry '2@blah'"),
        ("1@kafka1:9092,2@blah,", "entry '2@blah'"),
        ("1@kafka1:9092:1@kafka2:9092", "expected one '@'"),
        # and the rest of what QuorumConfig, Utils.getPort and InetSocketAddress throw on
        ("x@ctrl:9093", "the node id 'x' is not a 32-bit integer"),
        ("2147483648@ctrl:9093", "the node id '2147483648' is not a 32-bit integer"),
        ("1@ctrl:65536", "the port 65536 is not 0 to 65535"),
        ("1@ctrl:99999999999", "the port 99999999999 is not 0 to 65535"),
        ("1@ctrl host:9093", "what follows '@' is not HOST:PORT"),
        ("1@0.0.0.0:9093", "the host '0.0.0.0' is the wildcard address 0.0.0.0, which is not routable"),
        ("1@0:9093", "the host '0' is the wildcard address"),
        ("1@[::ffff:0.0.0.0]:9093", "the host '::ffff:0.0.0.0' is the wildcard address"),
    ],
)
def test_what_kafka_refuses_is_refused_naming_the_source_and_the_entry(text: str, told: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_quorum_voters(text, source="--voters")
    assert str(refused.value).startswith("--voters: ")
    assert told in str(refused.value)
    assert "ID@HOST:PORT" in str(refused.value)


def test_rendering_brackets_ipv6_hosts_as_utils_format_address_does() -> None:
    voters = [QuorumVoter(3000, "ctrl1", 9093), QuorumVoter(3001, "fe80::1%eth0", 9093)]
    assert render_quorum_voters(voters) == "3000@ctrl1:9093,3001@[fe80::1%eth0]:9093"


def test_a_voter_set_refuses_what_no_quorum_can_run_with() -> None:
    assert voter_set(parse_quorum_voters("3000@a:9093,3001@b:9093")) == {
        3000: QuorumVoter(3000, "a", 9093),
        3001: QuorumVoter(3001, "b", 9093),
    }
    for text, told in [
        ("3000@a:9093,3000@b:9093", "node id 3000 is given twice ('3000@a:9093' and '3000@b:9093')"),
        ("-1@a:9093", "entry '-1@a:9093': a node id is 0 or more"),
        ("3000@a:0", "entry '3000@a:0': port 0 means any free port"),
        ("", "names no voter"),
    ]:
        with pytest.raises(InvalidRequestError, match=r"^--voters") as refused:
            voter_set(parse_quorum_voters(text, source="--voters"), source="--voters")
        assert told in str(refused.value)


def routable(host: str) -> bool:
    """Not a spelling Java reads as 0.0.0.0 (which Kafka refuses)."""
    if host in WILDCARD_SPELLINGS:
        return False
    try:
        mapped = ipaddress.IPv6Address(host).ipv4_mapped
    except ValueError:
        return True
    return "%" in host or mapped is None or int(mapped) != 0


hosts = st.text(HOST_CHARACTERS, max_size=20).filter(routable)
voters = st.builds(
    QuorumVoter,
    node_id=st.integers(-(2**31), 2**31 - 1),
    host=hosts,
    port=st.integers(0, 65535),
)


@given(st.lists(voters, max_size=6))
def test_rendered_voters_parse_back_to_themselves(given_voters: list[QuorumVoter]) -> None:
    assert parse_quorum_voters(render_quorum_voters(given_voters)) == tuple(given_voters)


# Strings near the syntax, so that both acceptance and every refusal are reached, and strings of anything.
near_syntax = st.lists(
    st.one_of(
        st.sampled_from(["@", ":", ",", " ", "[", "]", "://", "0", "9093", "-", "+", "%", ".", "::ffff:"]),
        st.text(HOST_CHARACTERS + "@, []/\t٣", max_size=6),
    ),
    max_size=12,
).map("".join)


@given(st.one_of(near_syntax, st.text()))
def test_any_string_parses_or_is_refused_with_our_error(text: str) -> None:
    try:
        parsed = parse_quorum_voters(text)
    except Zk2KraftError as refused:
        assert str(refused).startswith("controller.quorum.voters")
        return
    assert parse_quorum_voters(render_quorum_voters(parsed)) == parsed
