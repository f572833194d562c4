"""Harnesses the tests share: real ZooKeeper and bridges, PKI, request builders, handler scaffolding, strategies."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"  # real files from real clusters; each folder's README says where they came from
