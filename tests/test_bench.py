"""norms.fast.bench (``make bench``): it runs on tiny shapes and writes valid records.

No timing is asserted: the numbers depend on the machine and its load. What is
checked is the shape of the output (one record per case, direction and
implementation, one copy record per shape, positive times, the byte and flop
counts of the formulas) and that the report and the JSON agree.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from norms.fast import bench, machine

CASES = bench.TINY_CASES


@pytest.fixture(scope="module")
def records():
    lines = []
    threads = torch.get_num_threads()
    out = bench.run(CASES, threads=1, rounds=2, block_s=0.001, warmup=1, progress=lines.append)
    assert torch.get_num_threads() == threads, "run() must restore the thread count"
    assert len(lines) == len({c.shape for c in CASES}) + len(CASES) * len(bench.DIRECTIONS)
    return out


def test_one_record_per_case_direction_and_impl(records):
    keys = [
        (r["op"], tuple(r["shape"]), r["direction"], r["impl"])
        for r in records
        if r["impl"] != "copy"
    ]
    wanted = [(c.op, c.shape, d, i) for c in CASES for d in bench.DIRECTIONS for i in bench.IMPLS]
    assert sorted(keys) == sorted(wanted)


def test_one_copy_record_per_shape(records):
    copies = [r for r in records if r["impl"] == "copy"]
    assert sorted(tuple(r["shape"]) for r in copies) == sorted({c.shape for c in CASES})
    for r in copies:
        assert r["op"] == "copy" and r["bytes"] == 2 * 4 * math.prod(r["shape"])


def test_records_have_valid_fields(records):
    cases = {(c.op, c.shape): c for c in CASES}
    for r in records:
        assert {"op", "shape", "direction", "impl", "median_s", "iqr_s", "bytes"} <= set(r)
        assert r["direction"] in bench.DIRECTIONS and r["impl"] in (*bench.IMPLS, "copy")
        assert r["median_s"] > 0 and math.isfinite(r["median_s"])
        assert r["iqr_s"] >= 0 and math.isfinite(r["iqr_s"])
        assert r["runs"] >= 2 and r["threads"] == 1 and r["dtype"] == "float32"
        assert r["copy_fraction"] > 0
        if r["impl"] != "copy":
            case = cases[(r["op"], tuple(r["shape"]))]
            assert r["bytes"] == bench.perfect_bytes(case, r["direction"])
            assert r["flops"] == bench.flops(case, r["direction"])
        assert ("compile_s" in r) == (r["impl"] == "fused")


def test_written_json_and_report(records, tmp_path):
    results, report = bench.write(records, tmp_path / "bench")
    assert json.loads(results.read_text()) == records
    text = report.read_text()
    for case in CASES:
        assert case.op in text and "x".join(map(str, case.shape)) in text
    assert "Largest fused/torch ratio" in text
    rows = bench.summary(records)
    assert len(rows) == len(CASES) * len(bench.DIRECTIONS)
    assert all(row["torch_x"] == 1.0 for row in rows)
    assert "CPU: " in text and "SIMD: " in text and "## 1 thread(s)" in text


def test_readme_table_has_one_row_per_case_and_direction(records):
    text = bench.readme_table(records)
    lines = text.splitlines()
    assert "CPU: " in lines[0] and "SIMD: " in lines[0]
    skip = ("| case", "| ---")
    body = [line for line in lines if line.startswith("| ") and not line.startswith(skip)]
    assert len(body) == len(CASES) * len(bench.DIRECTIONS)
    rows = {(r["op"], r["shape"], r["direction"]): r for r in bench.summary(records)}
    for line in body:
        cells = [c.strip() for c in line.strip("|").split("|")]
        op, shape = cells[0].split(" ")
        row = rows[op, tuple(map(int, shape.split("x"))), cells[1]]
        assert cells[2] == f"{row['fused_x']:.2f}x"
        if cells[1] == "fwd":
            assert cells[3] == f"{100 * row['fused_frac']:.0f} / {100 * row['torch_frac']:.0f}"
        else:
            assert cells[3] == "-"
    assert "## For the README" in bench.report_markdown(records)


def test_perfect_bytes_counts_inputs_and_outputs_once():
    case = bench.Case("LayerNorm", (2, 3, 4), (4,))  # 24 elements, weight and bias of 4
    assert bench.perfect_bytes(case, "fwd") == (24 + 24 + 8) * 4  # x, y, params
    assert (
        bench.perfect_bytes(case, "fwd+bwd") == (24 + 24 + 8) * 4 + (24 + 24 + 24 + 8 + 8) * 4
    )  # x, dy, dx, params, their grads
    assert bench.perfect_bytes(case, "fwd", itemsize=2) == (24 + 24 + 8) * 2
    rms = bench.Case("RMSNorm", (2, 3, 4), (4,))  # weight only
    assert bench.perfect_bytes(rms, "fwd") == (24 + 24 + 4) * 4
    with pytest.raises(ValueError, match="direction"):
        bench.perfect_bytes(case, "bwd")


def test_flops_follow_the_formula():
    assert bench.flops(bench.Case("LayerNorm", (2, 3, 4), (4,)), "fwd") == 7 * 24
    assert bench.flops(bench.Case("RMSNorm", (2, 3, 4), (4,)), "fwd+bwd") == 13 * 24


def test_layers_have_the_same_parameters_in_every_impl():
    for case in CASES:
        layers = [bench.make_layer(case, impl) for impl in bench.IMPLS]
        for a, b in zip(layers[0].parameters(), layers[1].parameters(), strict=True):
            assert not torch.equal(a, torch.ones_like(a))  # non-trivial gamma/beta
            torch.testing.assert_close(a, b)
        x = torch.randn(case.shape)
        torch.testing.assert_close(layers[1](x), layers[0](x))
    with pytest.raises(ValueError, match="impl"):
        bench.make_layer(CASES[0], "numpy")


def test_command_line_writes_the_files(tmp_path, capsys):
    assert bench.main(["--tiny", "--ops", "RMSNorm", "--rounds", "1", "--out", str(tmp_path)]) == 0
    records = json.loads((tmp_path / "results.json").read_text())
    assert {r["impl"] for r in records} == {"torch", "norms", "fused", "copy"}
    assert {r["op"] for r in records} == {"RMSNorm", "copy"}
    assert {r["threads"] for r in records} == {1, 2}  # the default: one thread, then two
    out = capsys.readouterr().out
    assert "RMSNorm" in out
    assert out.count("CPU: ") >= 3 and "SIMD: " in out  # one line per thread count, the report
    assert "## 1 thread(s)" in out and "## 2 thread(s)" in out


def test_the_machine_is_named():
    info = bench.machine(3)
    assert info["cpu"] and info["threads"] == 3 and info["cores"] >= 1
    assert info["simd"] in ("AVX-512", "AVX2", "AVX", "SSE4.2", "NEON", "SVE", "none", "unknown")
    line = bench.machine_line(info)
    assert info["cpu"] in line and info["simd"] in line and "3 thread(s)" in line


@pytest.mark.parametrize(
    "features, arch, level",
    [
        ("flags : fpu sse4_2 avx avx2 avx512f", "x86_64", "AVX-512"),
        ("flags : fpu sse4_2 avx avx2 fma", "x86_64", "AVX2"),
        ("flags : fpu sse4_2", "x86_64", "SSE4.2"),
        ("Features : fp asimd", "aarch64", "NEON"),
        ("Features : fp asimd sve", "aarch64", "SVE"),
    ],
)
def test_simd_level(features, arch, level):
    assert machine.simd_level(features, arch) == level


def test_importing_norms_loads_no_benchmark_or_cpp_extension_tools():
    """`import norms` (and what the chapters import) must not load torch.utils.benchmark: it loads
    torch.utils.cpp_extension, which on a CUDA build of torch without a GPU (a Colab CPU runtime)
    prints a warning into the first cell of every notebook."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "import norms, norms.quiz, norms.plots, norms.explore.widgets, norms.lab.training, "
        "norms.fast.fused, norms.distributed\n"
        "print(sorted(m for m in ('torch.utils.benchmark', 'torch.utils.cpp_extension') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
