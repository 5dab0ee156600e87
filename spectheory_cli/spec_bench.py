"""``--task spec-bench`` in ``bench`` and ``report``: Spec-Bench's table for one draft, or for every draft with
``--draft all`` (``jobs.spec_bench.whole_table``: the drafts of ``suite_drafts``, EAGLE-2's dynamic
tree and, on a GGUF target with llama-cpp-python installed, llama.cpp's prompt lookup); docs/measuring.md."""

from __future__ import annotations

import argparse

import torch

from decoders.sampling import Sampling
from measure.bench import BenchSettings
from measure.spec_bench_suite import SUITE_SETTINGS, spec_bench_document, suite_drafts
from measure.spec_bench_table import spec_bench_lines
from jobs.spec_bench import whole_table
from spectheory.outputs import check_writable, write_json

__all__ = ["ALL", "spec_bench_table", "run_spec_bench"]

ALL = "all"  # --draft all: the whole table


def _drafts(args: argparse.Namespace) -> dict:
    """{draft: gammas}: --gammas where given, else each draft's own (``suite_drafts``)."""
    own = suite_drafts(args.target)
    names = list(own) if args.draft == ALL else [args.draft]
    return {name: tuple(args.gammas) if args.gammas else own.get(name, SUITE_SETTINGS.gammas) for name in names}


def spec_bench_table(args: argparse.Namespace, settings: BenchSettings) -> dict:
    """The table the flags ask for, on ``settings``' prompts, tokens and repeats."""
    if args.text is not None:
        raise ValueError(f"--text {args.text}: Spec-Bench's questions are the prompts; drop --text or --task {args.task}")
    drafts = _drafts(args)
    settings = BenchSettings(gammas=tuple(sorted({g for gammas in drafts.values() for g in gammas})),
                             temperatures=settings.temperatures, prompts=settings.prompts,
                             max_new_tokens=settings.max_new_tokens, repeats=settings.repeats, warmup=settings.warmup,
                             call_steps=SUITE_SETTINGS.call_steps, seed=settings.seed, batch_sizes=())
    models = dict(target=args.target, device=args.device, dtype=getattr(torch, args.dtype))
    if args.draft == ALL:
        return whole_table(settings, args.task, drafts=drafts, **models)
    return spec_bench_document(drafts, settings, args.task, dynamic=None, **models)


def run_spec_bench(args: argparse.Namespace, sampling: Sampling) -> int:
    """--task spec-bench: the table of --draft (all: every draft, the dynamic tree and llama.cpp's rows)."""
    if sampling != Sampling() or args.hf or args.tree or args.policies is not None or args.batch_sizes:
        raise ValueError(f"--task {args.task} measures the greedy table only: drop --hf, --tree, --policies, "
                         f"--batch-sizes and the sampling flags")
    if args.out:
        check_writable(args.out)
    settings = BenchSettings(temperatures=tuple(args.temperatures), prompts=args.prompts,
                             max_new_tokens=args.max_new_tokens, repeats=args.repeats, warmup=args.warmup,
                             seed=args.seed, batch_sizes=())
    document = spec_bench_table(args, settings)
    if args.out:
        write_json(args.out, document, command=args.command_line)
    print("\n".join(spec_bench_lines(document)))
    if "engine_skipped" in document:
        print(f"no engine rows: {document['engine_skipped']}")
    return 0
