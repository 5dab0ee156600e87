"""Docstrings cite the repository's own documentation: every ``docs/theory.md §N`` names a section that
exists, and nothing cites files the repository does not carry. The pages (README.md, docs/) name files that
exist, and the outputs they quote of the torch-free commands are what the commands print."""

import json
import math
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from cli import main
from decoders.bench.bench_lines import recommendation_lines, summary_lines
from decoders.bench.report.document import ReportDocument
from decoders.bench.spec_bench.document import SpecBenchAnswer

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spectheory", "sims", "decoders", "paper_figs")


def _sources():
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_theory_references_against_its_sections():
    """Every ``docs/theory.md §N`` (or theory-trees.md, theory-sampling.md, theory-vocabularies.md,
    theory-goodput.md: the sections continue there under their numbers) in the sources names a section that page
    holds."""
    pages = ("theory", "theory-trees", "theory-sampling", "theory-vocabularies", "theory-goodput")
    sections = {
        page: set(re.findall(r"^## §(\d+) ", (ROOT / "docs" / f"{page}.md").read_text(), flags=re.M)) for page in pages
    }
    assert all(sections.values()) and not set.intersection(*sections.values())
    cited = {
        (path.relative_to(ROOT), page, number)
        for path in _sources()
        for page, group in re.findall(
            r"docs/(theory(?:-trees|-sampling|-vocabularies|-goodput)?)\.md\s+(§\d+(?:, §\d+)*)", path.read_text()
        )
        for number in re.findall(r"§(\d+)", group)
    }
    assert len(cited) >= 15, "the docstrings cite docs/theory.md"
    assert sorted((str(path), page, n) for path, page, n in cited if n not in sections[page]) == []


def test_no_reference_to_documents_outside_the_repository():
    outside = [
        str(path.relative_to(ROOT)) for path in _sources() if re.search(r"THEORY\.md|DESIGN\.md", path.read_text())
    ]
    assert outside == []


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CHECKED_COMMANDS = ("gamma", "tree", "schedule")  # torch-free and deterministic: their quoted outputs are rerun


def quoted_runs(text: str, commands=CHECKED_COMMANDS):
    """(command words, expected output lines) of every ``$ spectheory <commands>`` in a fenced block."""
    runs, current = [], None
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        current = None  # a run's output ends with its block
        for line in block.splitlines():
            if line.startswith("$ "):
                current = None
                words = shlex.split(line[2:].split("  #")[0])
                if words[:1] == ["spectheory"] and words[1:2] and words[1] in commands:
                    current = (words[1:], [])
                    runs.append(current)
            elif current is not None:
                current[1].append(line.rstrip())
    return runs


def matches(expected: list[str], actual: list[str]) -> list[str]:
    """Expected lines missing from the actual output, in order; "..." elides lines, and a line holding "..."
    must match the text before it."""
    missing, at = [], 0
    for line in expected:
        if line.strip() == "...":
            continue
        head = line.split("...")[0] if "..." in line else None
        found = next(
            (
                i
                for i in range(at, len(actual))
                if (actual[i].startswith(head) if head is not None else actual[i].rstrip() == line)
            ),
            None,
        )
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_outputs_against_the_commands(page, capsys, monkeypatch):
    """Every quoted run of a torch-free command in the README and docs/ prints what the page says."""
    monkeypatch.chdir(ROOT)
    for words, expected in quoted_runs(page.read_text()):
        assert main(words) == 0, words
        actual = capsys.readouterr().out.splitlines()
        assert matches(expected, actual) == [], words


def test_quoted_output_check_catches_a_changed_number():
    """The control: a quoted line whose number differs, or lines out of order, are reported missing."""
    actual = ["alpha = 0.8", "optimal gamma 8: 3.092x speedup", "done"]
    assert matches(["alpha = 0.8", "...", "optimal gamma 8: 3.092x ..."], actual) == []
    assert matches(["optimal gamma 7: 3.092x ..."], actual) == ["optimal gamma 7: 3.092x ..."]
    assert matches(["done", "alpha = 0.8"], actual) == ["alpha = 0.8"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_reports_against_their_results(page):
    """Every quoted `spectheory report --out results/DIR` prints what DIR/report.json's document does (its answers
    and its seconds; a Spec-Bench report its recommendation), so a committed report and its quote cannot drift
    apart."""
    for words, expected in quoted_runs(page.read_text(), commands=("report",)):
        out = words[words.index("--out") + 1] if "--out" in words else None
        if out is None or not out.startswith("results/"):
            continue  # a report the reader writes, not a committed one
        document = json.loads((ROOT / out / "report.json").read_text())
        answers = [line for line in expected if not line.startswith("wrote ")]
        printed = (
            recommendation_lines(SpecBenchAnswer.from_dict(document["recommendation"]))
            if "recommendation" in document
            else summary_lines(ReportDocument.from_dict(document))
        )  # report --task spec-bench, or the pair's report
        assert matches(answers, printed) == [], out
        wrote = [line for line in expected if line.startswith("wrote ")]
        assert all(line.endswith(f" in {document['seconds']:.0f} s") for line in wrote), out


def test_pages_name_files_that_exist():
    """Paths the pages name under docs/, results/, figures/ and docs/examples/ exist; the README stays a landing
    page (under 250 lines) with both commands."""
    named = {
        name
        for page in PAGES
        for name in re.findall(r"`((?:docs|results|figures)/[\w./-]+\.(?:md|json|txt))`", page.read_text())
    }
    assert named and sorted(name for name in named if not (ROOT / name).exists()) == []
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "bash .ci/install-core && spectheory report --out report" in readme
    test_command = (
        "bash .ci/install && python3 -m ruff format --check . && python3 -m ruff check . && "
        "python3 -m pytest -q -n 2 --dist loadfile"
    )
    assert test_command in readme


def test_measured_numbers_against_their_results():
    """docs/findings/smollm2.md quotes the SmolLM2 table as figures/table_real_model.md writes it, and the bench
    rows docs/findings/shipped-pair.md quotes from results/bench_standard_errors.json carry that file's numbers
    (speedup, SE, calibrated)."""
    page = (ROOT / "docs" / "findings" / "smollm2.md").read_text()
    table = [
        line for line in (ROOT / "figures" / "table_real_model.md").read_text().splitlines() if line.startswith("|")
    ]
    assert table and all(line in page for line in table)
    bench = json.loads((ROOT / "results" / "bench_standard_errors.json").read_text())
    shipped = (ROOT / "docs" / "findings" / "shipped-pair.md").read_text()
    block = shipped[shipped.index("results/bench_standard_errors.json") :]
    quoted = re.findall(
        r"^\s+(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+([\d.]+) \([\d.-]+\)\s+([\d.]+)\s+([\d.]+)", block, flags=re.M
    )
    assert len(quoted) >= 4
    rows = {(row["temperature"], row["gamma"]): row for row in bench["rows"]}
    for temperature, gamma, speedup, error, calibrated in quoted:
        row = rows[(float(temperature), int(gamma))]
        assert [float(speedup), float(error), float(calibrated)] == pytest.approx(
            [row["speedup"], row["speedup_standard_error"], row["calibrated_speedup"]], abs=5e-4
        )


def test_hf_comparison_table_against_its_results():
    """docs/findings/smollm2.md's table of our loops against transformers on SmolLM2 (the distilled and copy drafts)
    quotes each row's file: the ratios (medians) and seconds of ours padded and unpadded, assisted generation and
    `generate`."""
    lines = [
        line
        for line in (ROOT / "docs" / "findings" / "smollm2.md").read_text().splitlines()
        if line.startswith("| ") and "unpadded" not in line and "`results/hf_smollm2_" in line
    ]
    assert len(lines) == 4
    for line in lines:
        document = json.loads((ROOT / re.search(r"`(results/[\w.]+\.json)`", line).group(1)).read_text())
        row = document["hf"]["rows"][0]
        assert line.startswith(f"| {document['draft']}, {document['task']} | {document['hf']['gamma']} |")
        for text in (
            f"{row['speculative_ours_adapter_over_hf']:.2f}x",
            f"{row['speculative_ours_adapter_seconds']:.3f} s",
            f"{row['speculative_hf_assisted_seconds']:.3f} s",
            f"{row['speculative_ours_unpadded_over_hf']:.2f}x",
            f"{row['speculative_ours_unpadded_seconds']:.3f} s",
            f"{row['ar_ours_adapter_over_hf']:.2f}x",
        ):
            assert text in line, (text, line)


def test_engine_numbers_against_their_results():
    """docs/findings/llama-cpp.md's tables of llama.cpp carry their result files' numbers: the bench rows (measured
    speedup with its spread, predicted, their ratio, tokens per call, alpha) and each two-sample verdict's p-value."""
    page = (ROOT / "docs" / "findings" / "llama-cpp.md").read_text()
    bench = json.loads((ROOT / "results" / "llama_cpp_bench_rewrite.json").read_text())
    for row in bench["rows"]:
        low, _, high = row["speedup_spread"]
        assert (
            f"| {row['gamma']} | {row['speedup']:.3f} ({low:.3f}-{high:.3f}) | {row['predicted_speedup']:.3f} | "
            f"{row['predicted_over_measured']:.3f} | {row['tokens_per_iteration']:.2f} | {row['alpha']:.3f} |"
        ) in page
    for name in (
        "llama_cpp_audit_t1",
        "llama_cpp_audit_t07_topp09",
        "llama_cpp_audit_repeat_penalty",
        "llama_cpp_server_audit_t1",
        "llama_cpp_server_audit_t07_topp09",
        "llama_cpp_audit_repeat_penalty_replicate",
    ):
        verdict = json.loads((ROOT / "results" / f"{name}.json").read_text())
        row = next(line for line in page.splitlines() if f"`results/{name}.json`" in line)
        assert f"| {verdict['p_value']:.3g} |" in row and ("PASS" if verdict["passed"] else "FAIL") in row, row


def test_gpu_numbers_against_their_results():
    """docs/gpu.md's tables of the H100 run carry results/gpu's numbers: every call-table row (ms, medians) and
    the profile rows of the files beside it (t_step, t_draft, t_iteration, c, t_verify at 1, 8 and 64), for the
    first run (results/gpu/), the second (results/gpu/2026-11-27/), the third (results/gpu/2026-11-27b/) and the
    fourth, on an H200 (results/gpu/2026-11-27c/)."""
    page = (ROOT / "docs" / "gpu.md").read_text()
    check = json.loads((ROOT / "results" / "gpu" / "device_check.json").read_text())
    rows = re.findall(
        r"^\| (smollm2-[\w.]+) \| (\w+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", page, flags=re.M
    )
    assert len(rows) >= 9
    for shape, dtype, batch, *quoted in rows:
        widths = check["sections"][f"calls {shape} {dtype}"]["result"]["seconds_per_call"][batch]
        assert quoted == [f"{widths[k][1] * 1e3:.1f}" for k in ("1", "8", "64")], (shape, dtype, batch)
    later_runs = {
        "2026-11-27": (page.split("## The second run")[1].split("## The third run")[0], 4),
        "2026-11-27b": (page.split("## The third run")[1].split("## The fourth run")[0], 6),
        "2026-11-27c": (page.split("## The fourth run")[1], 6),
    }
    for run, (section, count) in later_runs.items():
        check = json.loads((ROOT / "results" / "gpu" / run / "device_check.json").read_text())
        rows = re.findall(r"^\| (smollm2-[\w.]+) \| (\w+) \| ([\d., ]+) \| ([\d., ]+) \|$", section, flags=re.M)
        assert len(rows) == count, run
        for shape, dtype, *quoted in rows:
            widths = check["sections"][f"calls {shape} {dtype}"]["result"]["seconds_per_call"]
            assert quoted == [
                ", ".join(f"{widths[batch][k][1] * 1e3:.1f}" for k in ("1", "8", "64")) for batch in ("1", "16")
            ], (run, shape, dtype)
    files = re.findall(r"^\|[^|\n]+\|([^`\n]+)\| `(results/gpu/[\w/-]*profile_[\w.-]+\.json)` \|$", page, flags=re.M)
    assert len(files) == 11
    for cells, name in files:
        p = json.loads((ROOT / name).read_text())["profile"]
        expected = [
            f"{p['t_step'] * 1e3:.1f}",
            f"{p['t_draft'] * 1e3:.2f}",
            f"{p['t_iteration'] * 1e3:.2f}",
            f"{p['c']:.4f}",
        ] + [f"{p['t_verify'][k - 1] * 1e3:.1f}" for k in (1, 8, 64)]
        assert [cell.strip() for cell in cells.split("|") if cell.strip()] == expected, name


def test_llama_server_verdicts_against_their_results():
    """docs/findings/llama-server.md's table of llama-server's audits quotes each result file: samples a side,
    detectable total variation, p-value and verdict; every result file of a llama-server audit has its row."""
    page = (ROOT / "docs" / "findings" / "llama-server.md").read_text()
    names = sorted(path.stem for path in (ROOT / "results").glob("llama_server_audit_*.json"))
    assert len(names) >= 4
    for name in names:
        verdict = json.loads((ROOT / "results" / f"{name}.json").read_text())
        row = next(
            (line for line in page.splitlines() if line.startswith("|") and f"`results/{name}.json`" in line), None
        )
        assert row is not None, name
        for text in (
            f"| {verdict['n_a']:,} |",
            f"| {verdict['detectable_tv']:.3f} |",
            f"| {verdict['p_value']:.3g} |",
            "| PASS |" if verdict["passed"] else "| FAIL |",
        ):
            assert text in row, (name, text, row)


def test_vllm_verdicts_against_their_results():
    """docs/findings/vllm.md's vLLM verdict table quotes each two-sample result file of results/vllm/: samples a side,
    p-value, detectable total variation, verdict and vLLM's accepted-of-drafted counters; every such file has its
    row."""
    page = (ROOT / "docs" / "findings" / "vllm.md").read_text()
    documents = {path: json.loads(path.read_text()) for path in sorted((ROOT / "results" / "vllm").glob("*.json"))}
    verdicts = {path: document for path, document in documents.items() if document.get("test") == "two-sample"}
    assert len(verdicts) >= 10
    for path, verdict in verdicts.items():
        name = f"`results/vllm/{path.name}`"
        row = next((line for line in page.splitlines() if line.startswith("|") and name in line), None)
        assert row is not None, name
        counters = verdict["counters"][0]
        for text in (
            f"| {verdict['n_a']} + {verdict['n_b']} |",
            f"| {verdict['p_value']:.3g} |",
            f"| {verdict['detectable_tv']:.4f} |",
            "| PASS |" if verdict["passed"] else "| FAIL |",
            f"| {counters['num_accepted_tokens']} of {counters['num_draft_tokens']} |",
        ):
            assert text in row, (name, text, row)


def test_cross_vocabulary_findings_against_their_results():
    """docs/findings/cross-vocabulary.md quotes every row of the cross-vocabulary bench and of the same-tokenizer
    drafts timed beside it (alpha, rho, tokens per call, speedup with its spread, forecast) and the audits'
    p-values, and docs/engines.md §7 the same p-values."""
    page = (ROOT / "docs" / "findings" / "cross-vocabulary.md").read_text()
    folder = ROOT / "results" / "cross_vocabulary"
    bench = json.loads((folder / "bench_smollm2_transformer.json").read_text())
    table = [line for line in page.splitlines() if re.match(r"\| [01] \| (slem|tli|slrs) \|", line)]
    beside = [line for line in page.splitlines() if re.match(r"\| [01] \| (smollm2-draft|copy|ngram) \|", line)]
    assert len(table) == len(bench["rows"]) == 12 and len(beside) == len(bench["beside_rows"]) == 18
    for line, row in [*zip(table, bench["rows"]), *zip(beside, bench["beside_rows"])]:
        spread = row["speedup_spread"]
        assert line == (
            f"| {row['temperature']:g} | {row.get('draft', row['method'])} | {row['gamma']} | {row['alpha']:.3f} | "
            f"{row['candidates_per_draft_token']:.2f} | {row['tokens_per_call']:.3f} | {row['speedup']:.3f}x "
            f"[{spread[0]:.2f}-{spread[2]:.2f}] | {row['forecast_speedup']:.3f}x |"
        ), line
    engines = (ROOT / "docs" / "engines.md").read_text()
    for name in ("hf_assisted_t1", "hf_generate_t1", "ours_tli_t1", "ours_slem_t1"):
        audit = json.loads((folder / f"audit_{name}.json").read_text())
        quoted = f"p = {audit['p_value']:.2g}" if audit["p_value"] < 1e-3 else f"p = {audit['p_value']:.3g}"
        assert quoted in page, (name, quoted)
        verdict = "PASS" if audit["passed"] else "FAIL"
        assert f"`audit_{name}.json` | {verdict}" in page, name
        if name != "ours_slem_t1":
            assert quoted in engines, (name, quoted)


def test_forecast_checks_finding_against_its_results():
    """docs/findings/forecast-checks.md quotes, per run and temperature, whether the forecast was shown, the checks
    that failed, forecast / measured over the sweep and both gammas, from results/forecast_checks/RUN.json; a withheld
    forecast's line is what RUN.txt printed."""
    page = (ROOT / "docs" / "findings" / "forecast-checks.md").read_text()
    folder = ROOT / "results" / "forecast_checks"
    for run in ("quiet1", "quiet2", "loaded1", "loaded2", "loaded3"):
        document = json.loads((folder / f"{run}.json").read_text())
        printed = (folder / f"{run}.txt").read_text().splitlines()
        for r, ahead in zip(document["recommendations"], document["forecast"]["temperatures"]):
            ratios = [row["forecast_over_measured"] for row in r["forecast_by_gamma"]]
            failed = [f"{c['name']} {c['value']:.2f}" for c in ahead["checks"]["checks"] if not c["passed"]]
            line = (
                f"| {run} | {ahead['temperature']:g} | {'withheld' if failed else 'shown'} | "
                f"{', '.join(failed) or '-'} | {min(ratios):.3f}-{max(ratios):.3f} | {r['forecast_gamma']} "
                f"({r['forecast_speedup']:.3f}x) | {r['best_measured_gamma']} ({r['best_measured_speedup']:.3f}x) |"
            )
            assert line in page, line
            assert bool(failed) == run.startswith("loaded") and (r["withheld"] in printed) == bool(failed)


def _forecast_rows(path: str) -> list:
    """(config, T, gamma, forecast, [low, high], measured, [min, max] over repeats) of every forecast row in a
    results/forecasts_real file: a cross-vocabulary bench's rows and the drafts beside them, or an engine bench's."""
    from spectheory.intervals import forecast_interval

    document = json.loads((ROOT / "results" / "forecasts_real" / path).read_text())
    if "rows" in document and "engine" in document:
        settings = document["engine_settings"]
        config = f"{document['engine'].split(' ')[0]} {settings.get('spec') or settings['method']}"
        return [
            (
                config,
                document["temperature"],
                r["gamma"],
                r["forecast_speedup"],
                r["forecast_interval"],
                r["speedup"],
                r["speedup_spread"],
            )
            for r in document["rows"]
        ]
    return [
        (
            row.get("draft") or row["method"],
            row["temperature"],
            row["gamma"],
            row["forecast_speedup"],
            row.get("forecast_interval") or forecast_interval(row["forecast_speedup"]),
            row["speedup"],
            row["speedup_spread"],
        )
        for row in document["rows"] + document["beside_rows"]
    ]


def _table_line(config: str, temperature: float, gamma: int, f: float, interval: list, m: float, spread: list) -> str:
    low, high = interval
    return (
        f"| {config} | {temperature:g} | {gamma} | {f:.3f}x | {low:.2f}-{high:.2f} ({high / low:.2f}) | "
        f"{m:.3f}x [{spread[0]:.2f}-{spread[-1]:.2f}] | {f / m:.3f} |"
    )


#: Issue 97's rows: SmolLM2 with its drafts and the cross-vocabulary methods, and each engine's drafter at T = 0 and 1.
REAL_FORECASTS = (
    "cross_bench_smollm2_8.json",
    *(
        f"{engine}_{drafter}_t{temperature}.json"
        for engine, drafter in (
            ("llama_server", "ngram"),
            ("llama_server", "draft24"),
            ("vllm", "ngram"),
            ("vllm", "suffix"),
            ("vllm", "draft24"),
        )
        for temperature in (0, 1)
    ),
)
#: Earlier runs, superseded by those above: fewer prompts, pooled counters, the first cost models, vLLM's round cost
#: timed on the cost prompt.
EARLIER_FORECASTS = (
    "cross_bench_smollm2.json",
    "llama_server_ngram.json",
    "vllm_ngram.json",
    "vllm_suffix.json",
    "vllm_draft24_t0_first_model.json",
    "vllm_draft24_t1_first_model.json",
    "vllm_draft24_t1_costs_once.json",
    *(
        f"vllm_{drafter}_t{temperature}_cost_prompt_round.json"
        for drafter in ("ngram", "suffix", "draft24")
        for temperature in (0, 1)
    ),
)


def test_real_model_forecasts_against_their_results():
    """docs/findings/forecasts-real.md quotes every forecast row of results/forecasts_real/: forecast, its 95% interval
    (the run error alone where the row states none) and width, the measurement with its range over repeats, and
    forecast / measured; and the summary over issue 97's rows (the earlier runs' rows are quoted, not summed)."""
    page = (ROOT / "docs" / "findings" / "forecasts-real.md").read_text()
    files = {path.name for path in (ROOT / "results" / "forecasts_real").glob("*.json")}
    assert files == set(REAL_FORECASTS + EARLIER_FORECASTS), files ^ set(REAL_FORECASTS + EARLIER_FORECASTS)
    for path in EARLIER_FORECASTS:
        for row in _forecast_rows(path):
            assert _table_line(*row) in page, _table_line(*row)
    errors, inside, widths = [], 0, []
    for path in REAL_FORECASTS:
        for row in _forecast_rows(path):
            assert _table_line(*row) in page, _table_line(*row)
            _, _, _, f, (low, high), m, _ = row
            errors.append(abs(f / m - 1))
            inside += low <= m <= high
            widths.append(high / low)
    summary = (
        f"{len(errors)} rows: |forecast / measured - 1| has a median of {statistics.median(errors):.3f} and a maximum "
        f"of {max(errors):.3f}; the stated interval covers {inside} of them, its median width "
        f"{statistics.median(widths):.2f}"
    )
    assert summary in " ".join(page.split()), summary


def test_engine_forecast_errors_against_their_sampling_errors():
    """docs/findings/forecasts-real.md weighs the engines' rows of issue 97 by their own sampling error: the bench's
    95% interval over its prompts and the forecast's jackknife, combined in log(forecast / measured)."""
    page = " ".join((ROOT / "docs" / "findings" / "forecasts-real.md").read_text().split())
    rows = []  # (log(forecast / measured), its standard error)
    for path in REAL_FORECASTS[1:]:
        for r in json.loads((ROOT / "results" / "forecasts_real" / path).read_text())["rows"]:
            low, high = r["speedup_interval"]
            measured = math.log(high / low) / 2 / 1.96
            forecast = r["forecast_standard_error"] / r["forecast_speedup"]
            rows.append((math.log(r["forecast_speedup"] / r["speedup"]), math.hypot(measured, forecast)))
    errors = [e for _, e in rows]
    z = [d / e for d, e in rows]
    worst = sorted(range(len(z)), key=lambda i: -abs(z[i]))[:2]  # two rows tie at z = 2.37
    for quoted in (
        f"Over the engines' {len(rows)} rows",
        f"standard error of {min(errors):.3f}-{max(errors):.3f} (median {statistics.median(errors):.3f})",
        f"runs from {min(z):.2f} to {max(z):.2f}, its mean square {statistics.mean(v * v for v in z):.2f}",
        f"{sum(v * v for v in z):.1f} over {len(rows)} rows",
        f"its mean {statistics.mean(z):.2f} (standard error {1 / math.sqrt(len(rows)):.2f})",
        f"forecast / measured {math.exp(statistics.mean(d for d, _ in rows)):.3f})",
        *(f"(z = {z[i]:.2f}, standard error {errors[i]:.3f}, " for i in worst),
    ):
        assert quoted in page, quoted


def test_llama_server_bench_rows_against_their_results():
    """docs/findings/llama-server-speed.md quotes every row of llama-server's bench files: measured speedup with its
    spread, predicted, their ratio, tokens per call and mean proposal length."""
    page = (ROOT / "docs" / "findings" / "llama-server-speed.md").read_text()
    for name in (
        "llama_server_bench_draft24_rewrite",
        "llama_server_bench_ngram_rewrite",
        "llama_server_bench_draft24_rewrite_interleaved",
        "llama_server_bench_ngram_defaults",
    ):
        for row in json.loads((ROOT / "results" / f"{name}.json").read_text())["rows"]:
            low, _, high = row["speedup_spread"]
            assert (
                f"| {row['gamma']} | {row['speedup']:.3f} ({low:.3f}-{high:.3f}) | {row['predicted_speedup']:.3f} | "
                f"{row['predicted_over_measured']:.3f} | {row['tokens_per_iteration']:.2f} | "
                f"{row['mean_proposal_length']:.2f} |"
            ) in page, (name, row["gamma"])


def test_compiled_cpu_table_against_its_results():
    """docs/findings/compiled-cpu.md's table of the compiled path on a CPU carries
    results/compiled_cpu/compiled_cpu.json's medians, row by row, as the page prints them."""
    page = (ROOT / "docs" / "findings" / "compiled-cpu.md").read_text()
    document = json.loads((ROOT / "results" / "compiled_cpu" / "compiled_cpu.json").read_text())
    rows = []
    for pair, entry in document["pairs"].items():
        for name, row in entry["rows"].items():
            speedups = [f"{row[key]:.3f}" if key in row else "-" for key in ("eager_speedup", "compiled_speedup")]
            rows.append(
                f"| {pair} | {name} | {row['eager_ms_per_token']:.2f} | {row['compiled_ms_per_token']:.2f} | "
                f"{row['compiled_over_eager']:.3f} | {' | '.join(speedups)} | {row['greedy_tokens_equal']} |"
            )
    assert len(rows) == 5 and [row for row in rows if row not in page] == []


def _patched_against_unpatched(report: str, stem: str, n: int) -> tuple:
    """The unpatched and patched builds' audits ``results/{stem}{,_patched}.json``: the unpatched FAILs and the
    patched PASSes at ``n`` a side against the same plain rows, with the p-values docs/upstream/``report`` and
    docs/findings/llama-server.md print; returned for the checks particular to each report."""
    page = (ROOT / "docs" / "upstream" / report).read_text()
    engines = (ROOT / "docs" / "findings" / "llama-server.md").read_text()
    unpatched, patched = (json.loads((ROOT / "results" / f"{stem}{end}.json").read_text()) for end in ("", "_patched"))
    assert not unpatched["passed"] and patched["passed"]
    assert unpatched["n_a"] == patched["n_a"] == n and unpatched["rows_b"] == patched["rows_b"]
    for document in (unpatched, patched):
        assert f"p = {document['p_value']:.3g}" in page and f"| {document['p_value']:.3g} |" in engines
    return unpatched, patched, page


def test_mirostat_report_against_its_results():
    """docs/upstream/llama-server-mirostat.md: the unpatched build FAILs and the patched one PASSes at the same n, the
    same seeds (the same drafts counted) and the same plain rows."""
    unpatched, patched, _ = _patched_against_unpatched(
        "llama-server-mirostat.md", "llama_server_audit_rejection_mirostat2_tau2_eta2_10k", 10_000
    )
    assert unpatched["counters"][0] == patched["counters"][0]


def test_adaptive_p_report_against_its_results():
    """docs/upstream/llama-server-adaptive-p.md: the unpatched build FAILs and the patched one PASSes at the same n,
    seeds (the same first tokens) and plain rows; the reproduction's output is the one the report quotes, its control
    passing and the speculating server's second token failing."""
    unpatched, patched, page = _patched_against_unpatched(
        "llama-server-adaptive-p.md", "llama_server_audit_rejection_adaptive_p05_replicate", 4_000
    )
    assert [row[0] for row in unpatched["rows_a"]] == [row[0] for row in patched["rows_a"]]
    assert (
        f"(p = {unpatched['p_value']:.3g})" in (ROOT / "decoders" / "engines" / "llama_server.py").read_text()
    )  # its known deviation
    output = (ROOT / "results" / "llama_server_adaptive_p" / "output.txt").read_text()
    assert output.strip() in page
    control, speculating = output.split("plain against speculating")
    assert "token 2: chi-square 2.6 on 5 degrees of freedom, p = 0.759" in control
    assert "token 2: chi-square 26.9 on 7 degrees of freedom, p = 0.000395" in speculating


def test_rejection_law_script_against_the_reports():
    """docs/upstream/llama_server_rejection_law.py, the exact law of llama.cpp's verifiers on the smallest case: the
    match path and the patched rejection path keep plain decoding's law to rounding, the shipped rejection path does
    not under Mirostat 2 (tau 1.5, eta 2) or adaptive-p, and fixed uniforms move the first token's law where fresh
    ones do not; both reports quote its output as it prints it."""
    import subprocess
    import sys

    script = ROOT / "docs" / "upstream" / "llama_server_rejection_law.py"
    output = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    variations = [float(v) for v in re.findall(r"total variation ([0-9.e+-]+)", output)]
    # match, shipped, patched for Mirostat 2, Mirostat 2 at the defaults and adaptive-p; then fixed and fresh uniforms
    assert len(variations) == 13
    shipped = variations[1], variations[7]
    exact = [variations[i] for i in (0, 2, 3, 4, 5, 6, 8)] + [variations[12]]
    assert min(shipped) > 0.05 and max(exact) < 1e-9 and min(variations[9:12]) > 0.05
    for report in ("llama-server-mirostat.md", "llama-server-adaptive-p.md"):
        assert output.strip() in (ROOT / "docs" / "upstream" / report).read_text(), report


@pytest.mark.parametrize(
    "name, where",
    [("power.json", "samples a side on an open chat prompt"), ("power_code.json", "on a low-entropy code prompt")],
)
def test_mirostat_power_against_its_results(name, where):
    """The sample size llama-server's engine and the report quote for finding the Mirostat bug with 90% probability
    on each prompt is the first measured n at or above 90% in results/llama_server_mirostat/``name``, and its control
    (the patched build's rows, or the plain rows' halves) fails at about the level."""
    document = json.loads((ROOT / "results" / "llama_server_mirostat" / name).read_text())
    first = next(row for row in document["rows"] if row["power"] >= 0.9)
    quoted = (ROOT / "decoders" / "engines" / "llama_server.py").read_text() + (
        ROOT / "docs" / "upstream" / "llama-server-mirostat.md"
    ).read_text()
    assert f"from about {first['n']:,} {where}" in " ".join(quoted.replace('"', " ").split())
    assert all(row["control_failure_rate"] <= 0.03 for row in document["rows"])


def test_samplers_acted_against_their_results():
    """docs/findings/llama-server.md's table of whether each sampler of the sweep acted is
    results/llama_server_samplers/ active.json's, and every sampler acted on the rows its audits compared except DRY on
    the chat prompt, which the page calls vacuous and audits again on a repetitive prompt where it acts."""
    engines = (ROOT / "docs" / "findings" / "llama-server.md").read_text()
    rows = json.loads((ROOT / "results" / "llama_server_samplers" / "active.json").read_text())["rows"]
    for row in rows:
        assert f"| {row['sampler']} | `{row['against']}` | {row['p_value']:.3g} |" in engines, row["sampler"]
    assert [row["sampler"] for row in rows if not row["acted"]] == ["dry08"]
    assert "its PASS there\n  is vacuous" in engines


def test_report_times_against_the_committed_reports():
    """The report's help states what the committed reports took, each on the settings it states: results/report on
    today's defaults, at most 4 minutes, results/report_full on --full's; the README states the first."""
    from dataclasses import asdict

    from cli.report import FULL_SECONDS, MAIN_SECONDS
    from decoders.bench.report.settings import FULL_SETTINGS, ReportSettings

    for seconds, out, settings in (
        (MAIN_SECONDS, "report", ReportSettings()),
        (FULL_SECONDS, "report_full", FULL_SETTINGS),
    ):
        document = json.loads((ROOT / "results" / out / "report.json").read_text())
        assert seconds == round(document["seconds"]), out
        assert document["settings"] == json.loads(json.dumps(asdict(settings))), out
    assert MAIN_SECONDS <= 240
    assert f"`results/report/`, {MAIN_SECONDS} s on 2 CPU cores" in (ROOT / "README.md").read_text()


def _row(*cells) -> str:
    return "| " + " | ".join(cells) + " |"


def test_extending_tables_against_the_registries():
    """docs/extending.md's four tables list exactly the registered engines, drafts and audit tests, and the engines'
    optional capabilities, in order, as their registries declare them (a new built-in entry needs its row)."""
    import decoders.audit.setups  # noqa: F401  (registers the tiny drafts)
    import decoders.audit.two_sample  # noqa: F401  (registers the two-sample tests)
    from decoders.audit.battery import AUDIT_TESTS
    from decoders.drafts import DRAFT_KINDS
    from decoders.engines import ENGINE_KINDS
    from decoders.engines.base import CAPABILITIES

    text = (ROOT / "docs" / "extending.md").read_text()
    engines = [_row(f"`{k.name}`", f"`{k.usage}`", k.speculation, k.description) for k in ENGINE_KINDS.values()]
    drafts = [
        _row(f"`{k.usage}`", ", ".join(sorted(k.offered)) or f"with --target {k.only_target}", k.description)
        for k in DRAFT_KINDS.values()
    ]
    tests = [_row(f"`{t.name}`", t.battery, t.description, t.power or "none") for t in AUDIT_TESTS.values()]
    for header, rows in (("| engine |", engines), ("| draft |", drafts), ("| test |", tests)):
        table = text[text.index(header) :].split("\n\n")[0].splitlines()[2:]
        assert table == rows, (header, table, rows)
    capabilities = text[text.index("| capability |") :].split("\n\n")[0].splitlines()[2:]
    assert [re.match(r"\| `(\w+)", row).group(1) for row in capabilities] == list(CAPABILITIES)


def test_pages_against_the_size_limit():
    """No documentation page over 40 KB (reference and findings split, docs/project.md): a reader can hold one."""
    sizes = {str(page.relative_to(ROOT)): page.stat().st_size for page in PAGES}
    assert len(sizes) > 10 and {page: size for page, size in sizes.items() if size > 40_000} == {}


def test_readme_example_against_its_printed_output():
    """The README's Python example is examples/exact.py, verbatim, and running it prints what the README shows
    (its decode is seeded and its audit exact)."""
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    assert (ROOT / "examples" / "exact.py").read_text().split("\n\n", 1)[1] == code
    shown = re.search(r"```python\n.*?```\n\nprints\n\n```\n(.*?)```", readme, re.S).group(1)
    ran = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "exact.py")], capture_output=True, text=True, cwd=ROOT
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == shown
