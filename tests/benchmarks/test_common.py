"""benchmarks.common: the synthetic graph every store benchmark loads, and the helpers the scripts share."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

from benchmarks import common
from memora_rl.memory import open_store


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(common).failed == 0


def test_bulk_load_writes_the_entries_whose_vectors_it_returns(tmp_path) -> None:
    dim = 32  # the vectors are given: no embedder is loaded
    with open_store(tmp_path / "g.sqlite") as store:
        graph = common.bulk_load(store, 250, dim, np.random.default_rng(0), pool=20, value_noise=0.5, chunk=100)
        assert store.stats(common.GRAPH)["entries"] == 250 and store.stats(common.GRAPH)["anchors"] == 20
        assert graph.abstractions.shape == graph.values.shape == (250, dim)
        assert graph.anchors.shape == (20, dim) and graph.links.shape == (250, 3) and graph.seconds > 0
        first, last = store.get_entries(common.GRAPH, ["e0", "e249"])
        assert (first.abstraction, first.value) == common.word_texts(0)
        assert first.source_turn_ids == ["D1:1"] and last.source_turn_ids == ["D3:50"]
        assert len(first.anchor_ids) == len(set(graph.links[0].tolist()))
        stored = store.abstraction_vectors(common.GRAPH, ["e17"])[0]
        assert math.isclose(float(stored @ graph.abstractions[17]), 1.0, rel_tol=1e-5)
        value_cosine = float(store.value_vectors(common.GRAPH, ["e17"])[0] @ graph.abstractions[17])
        assert 0.7 < value_cosine < 0.99  # near the abstraction: 1 / sqrt(1 + 0.5^2) ~ 0.89 expected


def test_values_are_independent_of_abstractions_without_noise() -> None:
    class Sink:
        def add_entries_bulk(self, *args: object) -> None:
            self.calls = [*getattr(self, "calls", []), args]

    sink = Sink()
    graph = common.bulk_load(sink, 300, 64, np.random.default_rng(1), graph="g", value_noise=None, chunk=128)
    assert [len(call[1]) for call in sink.calls] == [128, 128, 44] and {call[0] for call in sink.calls} == {"g"}
    cosines = np.einsum("ij,ij->i", graph.abstractions, graph.values)
    assert abs(float(cosines.mean())) < 0.05


def test_percentiles_are_milliseconds_and_nan_without_samples() -> None:
    assert common.percentiles([0.001] * 19 + [0.1]) == (1.0, common.percentile_ms([0.001] * 19 + [0.1], 95))
    assert math.isnan(common.percentile_ms([], 50))


def test_a_rich_table_becomes_a_record_table_cell_for_cell() -> None:
    from rich.table import Table

    table = Table(title="latency (ms)")
    table.add_column("size")
    table.add_column("p50", justify="right")
    table.add_row("1,000", "0.5")
    table.add_row("10,000", "[bold]2.0[/]")
    converted = common.from_rich(table)
    assert converted.title == "latency (ms)" and converted.columns == ["size", "p50"]
    assert converted.rows == [["1,000", "0.5"], ["10,000", "2.0"]]  # markup is styling, not a figure


def test_save_record_writes_only_when_asked(tmp_path, monkeypatch) -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser()
    common.add_record_option(parser)
    table = common.result_table("t", ["a"], [[1]])
    assert common.save_record(parser.parse_args([]), "title", [table]) is None
    monkeypatch.setattr("sys.argv", [str(common.REPO_ROOT / "benchmarks" / "env_step.py"), "--sizes", "500"])
    args = parser.parse_args(["--record", "bench-x", "--results-dir", str(tmp_path)])
    path = common.save_record(args, "Env step", [table], notes=["2.0x faster"])
    record = json.loads(path.read_text())
    assert path == tmp_path / "bench-x.json" and record["title"] == "Env step"
    assert record["command"] == "python -m benchmarks.env_step --sizes 500"
    assert record["tables"][0]["rows"] == [["1"]] and record["notes"] == ["2.0x faster"]
    assert record["split"] is None
    path = common.save_record(args, "Env step", [table], split="validation", argv=["--sizes", "9"])
    record = json.loads(path.read_text())
    assert record["command"] == "python -m benchmarks.env_step --sizes 9" and record["split"] == "validation"
    bad = parser.parse_args(["--record", "Not A Name", "--results-dir", str(tmp_path)])
    with pytest.raises(ValueError, match="name"):
        common.save_record(bad, "title", [table])
    assert [p.name for p in tmp_path.iterdir()] == ["bench-x.json"]
