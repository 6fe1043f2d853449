"""The benchmark's records as tables: one row per case (:func:`summary`), the README's table,
the Markdown report, and the files ``make bench`` writes (:func:`write`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from .cases import IMPLS
from .machine import machine, machine_line

__all__ = ["summary", "readme_table", "report_markdown", "write"]


def _key(r: dict) -> tuple:
    return (r.get("threads"), r["op"], tuple(r["shape"]), r["direction"])


def summary(records: Sequence[dict]) -> list[dict]:
    """One row per (threads, op, shape, direction): each impl's median and its ratio to torch.

    Returns dicts with ``threads``, ``op``, ``shape``, ``direction``, ``<impl>_s``,
    ``<impl>_x`` (median over torch's median) and ``<impl>_frac`` (fraction of
    the copy bandwidth) for every impl present.
    """
    rows: dict[tuple, dict] = {}
    for r in records:
        if r["impl"] == "copy":
            continue
        row = rows.setdefault(
            _key(r),
            {
                "threads": r.get("threads"),
                "op": r["op"],
                "shape": tuple(r["shape"]),
                "direction": r["direction"],
            },
        )
        row[f"{r['impl']}_s"] = r["median_s"]
        row[f"{r['impl']}_frac"] = r["copy_fraction"]
    for row in rows.values():
        if "torch_s" in row:
            for impl in IMPLS:
                if f"{impl}_s" in row:
                    row[f"{impl}_x"] = row[f"{impl}_s"] / row["torch_s"]
    return list(rows.values())


def _gpu(device: str) -> str:
    """``", GPU: <name>"`` when the records were measured on a GPU, else ``""``."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return ""
    return f", GPU: {torch.cuda.get_device_name(torch.device(device))} (the times are the GPU's)"


def readme_table(records: Sequence[dict]) -> str:
    """The table the README shows (Markdown, to paste): the CPU, then one row per case and
    direction with the fused path's time over torch's at every thread count measured, and, for
    forward cases, the fused path's and torch's fraction of the copy bandwidth."""
    rows = summary(records)
    threads = sorted({row["threads"] for row in rows}, key=str)
    info = machine(threads[0] if threads else None)
    by_key = {(row["threads"], row["op"], row["shape"], row["direction"]): row for row in rows}
    cases = list(dict.fromkeys((row["op"], row["shape"], row["direction"]) for row in rows))
    head = " | ".join(f"fused / torch, {t} thread(s)" for t in threads)
    frac = " | ".join(f"% copy fused / torch, {t} thread(s)" for t in threads)
    lines = [
        f"{machine_line(info).rsplit(', ', 1)[0]}, torch {torch.__version__}:",
        "",
        f"| case | direction | {head} | {frac} |",
        "| --- | --- |" + " ---: |" * (2 * len(threads)),
    ]
    for op, shape, direction in cases:
        ratios, fractions = [], []
        for t in threads:
            row = by_key.get((t, op, shape, direction), {})
            ratios.append(f"{row['fused_x']:.2f}x" if "fused_x" in row else "-")
            fractions.append(
                f"{100 * row['fused_frac']:.0f} / {100 * row['torch_frac']:.0f}"
                if direction == "fwd" and "fused_frac" in row and "torch_frac" in row
                else "-"
            )
        lines.append(
            f"| {op} {'x'.join(map(str, shape))} | {direction} | {' | '.join(ratios)} | "
            f"{' | '.join(fractions)} |"
        )
    return "\n".join(lines) + "\n"


def report_markdown(records: Sequence[dict]) -> str:
    """A readable table of ``records`` (Markdown): the CPU, then one table per thread count."""
    first = records[0] if records else {}
    info = machine(first.get("threads"))
    lines = [
        "# How fast is a normalization layer?",
        "",
        f"{machine_line(info).rsplit(', ', 1)[0]}{_gpu(first.get('device', 'cpu'))}. "
        f"torch {torch.__version__}, device {first.get('device', '?')}, {first.get('dtype', '?')}. "
        "Median of interleaved runs "
        "(torch.utils.benchmark); IQR in the JSON. `x torch`: median over torch's median. "
        "`% copy`: bytes a perfect kernel moves per second, as a percentage of the copy bandwidth "
        "of the same tensor in the same run.",
    ]

    def ms(row, impl):
        if f"{impl}_s" not in row:
            return "-"
        x = f" ({row[f'{impl}_x']:.2f}x)" if f"{impl}_x" in row and impl != "torch" else ""
        return f"{row[f'{impl}_s'] * 1e3:.2f}{x}"

    rows = summary(records)
    for threads in sorted({row["threads"] for row in rows}, key=str):
        lines += [
            "",
            f"## {threads} thread(s)",
            "",
            (
                "| layer | shape | direction | torch ms | norms ms (x torch) | fused ms (x torch) "
                "| % copy: torch / norms / fused |"
            ),
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for row in (r for r in rows if r["threads"] == threads):
            frac = " / ".join(
                f"{100 * row[f'{i}_frac']:.0f}" if f"{i}_frac" in row else "-" for i in IMPLS
            )
            shape = "x".join(map(str, row["shape"]))
            lines.append(
                f"| {row['op']} | {shape} | {row['direction']} | {ms(row, 'torch')} | "
                f"{ms(row, 'norms')} | {ms(row, 'fused')} | {frac} |"
            )
        fused_rows = [r for r in rows if r["threads"] == threads and "fused_x" in r]
        if fused_rows:
            worst = max(fused_rows, key=lambda r: r["fused_x"])
            lines += [
                "",
                f"Largest fused/torch ratio: {worst['fused_x']:.2f}x ({worst['op']} "
                f"{'x'.join(map(str, worst['shape']))} {worst['direction']}).",
            ]
    copies = [r for r in records if r["impl"] == "copy"]
    if copies:
        lines += ["", "Copy bandwidth (`dst.copy_(src)`, read + write):", ""]
        for r in copies:
            lines.append(
                f"- {'x'.join(map(str, r['shape']))}, {r['threads']} thread(s): "
                f"{r['bytes'] / r['median_s'] / 1e9:.1f} GB/s "
                f"({r['median_s'] * 1e3:.2f} ms, IQR {r['iqr_s'] * 1e3:.2f} ms)"
            )
    lines += ["", "## For the README (fused time over torch's; forward cases: % of copy)", ""]
    lines += readme_table(records).rstrip("\n").splitlines()
    compiles = [r["compile_s"] for r in records if "compile_s" in r]
    if compiles:
        lines += [
            "",
            f"Compile time of the fused path (first call): {sum(compiles):.1f} s in all, "
            f"at most {max(compiles):.1f} s for one case.",
        ]
    return "\n".join(lines) + "\n"


def write(records: Sequence[dict], outdir: str | Path) -> tuple[Path, Path]:
    """Write ``results.json`` (the records) and ``report.md`` into ``outdir``; return both paths."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    results = outdir / "results.json"
    report = outdir / "report.md"
    results.write_text(json.dumps(list(records), indent=1) + "\n")
    report.write_text(report_markdown(records))
    return results, report
