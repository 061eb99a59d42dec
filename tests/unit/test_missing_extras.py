"""A missing optional extra is named with the pip command that installs it, not skipped silently."""

from __future__ import annotations

import json
import sys

import pytest

from raftka.chaos.checker import check
from raftka.chaos.report import write_report


def test_chaos_plots_without_matplotlib_say_so(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ModuleNotFoundError
    summary = write_report(tmp_path, check([]), [], None)
    expected = "plots skipped: matplotlib is not installed (pip install 'raftka[chaos]')"
    assert summary["plot_error"] == expected
    assert json.loads((tmp_path / "results.json").read_text())["plot_error"] == expected


def test_the_spark_source_without_pyspark_says_which_extra(monkeypatch) -> None:
    # Every pyspark module: one imported earlier in this process (another test) is found in
    # sys.modules by name, without its parent package.
    for name in ["pyspark", *(n for n in sys.modules if n.startswith("pyspark."))]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [n for n in sys.modules if n.startswith("raftka.spark_source.data_source")]:
        monkeypatch.delitem(sys.modules, name)
    import raftka.spark_source as spark_source

    with pytest.raises(ModuleNotFoundError, match=r"pip install 'raftka\[spark\]'"):
        spark_source.RaftkaDataSource  # noqa: B018 - the lazy attribute is what raises
