"""`spectheory conformance`: one battery that tells an engine's maintainers where speculation changes what their
server returns: greedy tokens, the sampled law at several settings, reported log-probabilities, seeded requests
(docs/conformance.md). Exit 1 when a row fails."""

from __future__ import annotations

import argparse

from decoders.audit.engines.conformance import ConformanceRequest, conformance, conformance_lines, default_rows
from decoders.conformance_results import ConformanceDocument
from decoders.engines import engine_usages
from decoders.progress import progress_bar
from paper_figs.report import render_html, render_markdown
from plumbing.outputs import check_writable, write_json, write_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        required=True,
        metavar="ENGINE",
        help=f"the engine: {engine_usages()} (a local engine reads --target's GGUF file, default smollm2)",
    )
    parser.add_argument(
        "--against", metavar="URL", help="the plain server, where --engine is a URL that speculates by its own settings"
    )
    parser.add_argument("--target", help="the GGUF file (or registry name) a local engine serves (default smollm2)")
    parser.add_argument(
        "--rows",
        nargs="+",
        default=[],
        metavar="NAME",
        help="run these rows only (default all: " + ", ".join(row.name for row in default_rows()) + ")",
    )
    parser.add_argument("--n", type=int, default=2000, help="samples a side of a law row (default 2000)")
    parser.add_argument("--horizon", type=int, default=4, help="tokens a sample of the law and seed rows (default 4)")
    parser.add_argument("--gammas", type=int, nargs="+", default=[2, 4], help="draft lengths (default 2 4)")
    parser.add_argument("--level", type=float, default=0.01, help="each row's false-positive level (default 0.01)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight to a server (default 4)")
    parser.add_argument("--out", metavar="FILE.json", help="write the verdicts as JSON")
    parser.add_argument("--markdown", metavar="FILE.md", help="write the verdicts as a Markdown table")
    parser.add_argument("--html", metavar="FILE.html", help="write the verdicts as an HTML page")


def run(args: argparse.Namespace) -> int:
    request = ConformanceRequest(
        args.engine,
        args.against,
        args.target,
        tuple(args.rows),
        args.n,
        args.horizon,
        tuple(args.gammas),
        args.level,
        args.concurrency,
    )
    for path in (args.out, args.markdown, args.html):
        if path:
            check_writable(path)
    with progress_bar(None, total=len(request.battery()), desc="conformance", unit="row") as bar:
        document = conformance(request, bar.update)
    print("\n".join(conformance_lines(document)))
    if args.out:
        write_json(args.out, document.as_dict(), command=args.command_line)
    blocks = _blocks(document, args.command_line)
    if args.markdown:
        write_text(args.markdown, render_markdown(blocks))
    if args.html:
        write_text(args.html, render_html(blocks, title=f"conformance: {document.engine}"))
    return 1 if document.failed else 0


def _blocks(document: ConformanceDocument, command: str) -> list:
    """The verdicts as the report's blocks: a heading, the command, a table."""
    header = ["row", "verdict", "sent", "test", "n", "p", "detects TV", "details"]
    table = [
        [
            row.name,
            f"**{row.verdict}**",
            row.sent,
            row.test,
            str(row.n),
            "" if row.p_value is None else f"{row.p_value:.3g}",
            "" if row.detectable is None else f"{row.detectable:.3f}",
            row.details,
        ]
        for row in document.rows
    ]
    about = f"`{command}`; version {document.engine_version or 'not reported'}; level {document.level:g} a row"
    return [("heading", 1, f"Conformance: {document.engine}"), ("paragraph", about), ("table", header, table)]
