"""Pytest configuration shared by the unit tests and by nbval over book/.

nbval compares text outputs only and skips PNG images. A notebook committed with a
figure that no longer matches its code would then pass, and Colab and GitHub would
show a stale figure. Here nbval also compares ``image/png`` outputs byte for byte
(matplotlib's Agg output is deterministic for pinned versions), so `make test`
fails on a stale figure; `make execute` refreshes them.
"""

from __future__ import annotations

COMPARED_IMAGES = ("image/png",)


def pytest_collectstart(collector):
    skip = getattr(collector, "skip_compare", None)
    if skip is not None and collector.__class__.__name__ == "IPyNbFile":
        collector.skip_compare = tuple(k for k in skip if k not in COMPARED_IMAGES)


def pytest_collection_modifyitems(config, items):
    """nbval's cells run in the Colab-like kernel (make test, make test-colab): mark them colab,
    so that `make test-colab` (-m colab) runs them too."""
    import pytest

    for item in items:
        if type(item).__name__ == "IPyNbCell":
            item.add_marker(pytest.mark.colab)
