"""`make bench`: run every benchmark script in turn (each prints its own JSON result and ratios)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> None:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    for name in names:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main([])
    sys.exit(0)


if __name__ == "__main__":
    main()
