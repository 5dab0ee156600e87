"""Options that several commands share, defined once (and the lists of names they offer, from the
registries that own them)."""

from __future__ import annotations

import argparse

__all__ = [
    "add_device",
    "add_compile",
    "add_dtype",
    "names",
    "add_target",
    "add_text",
    "draft_help",
    "add_cost_flags",
    "flag_costs",
    "COST_FLAGS",
]

DTYPES = ("float32", "float16", "bfloat16", "float64")


def names(registry) -> str:
    """A registry's names for a help text: "a, b, c"."""
    return ", ".join(registry)


def device(value: str) -> str:
    """A torch device this machine has (an argparse type: a bad one is the usual one-line usage error)."""
    import torch  # only the commands that run models parse a device

    try:
        parsed = torch.device(value)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a torch device (e.g. cpu, cuda, cuda:1)") from None
    if parsed.type == "cuda" and (not torch.cuda.is_available() or (parsed.index or 0) >= torch.cuda.device_count()):
        raise argparse.ArgumentTypeError(f"{value!r}: this machine has {torch.cuda.device_count()} CUDA devices")
    if parsed.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{value!r}: only cpu and cuda devices are supported")
    return value


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=device, default="cpu", help="torch device: cpu or cuda[:N] (default cpu)")


def add_compile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="the compiled, static-cache decode path (docs/gpu.md): auto = on CUDA only (default)",
    )


def add_dtype(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="float32",
        help="model dtype (default float32; weights are stored as float16)",
    )


def add_target(parser: argparse.ArgumentParser) -> None:
    """``--target``: every kind of model the measuring commands load (``decoders.zoo.load_named``)."""
    from decoders.zoo import REAL_MODELS  # here: `spectheory gamma` imports this module and loads only the theory

    parser.add_argument(
        "--target",
        help=f"a real model ({names(REAL_MODELS)}), a GGUF file, a TinyGPT file in the "
        f"zoo's format or a local Hugging Face model directory (read locally, never "
        f"downloaded; its tokenizer from the same file or directory) (default: the "
        f"shipped target)",
    )


def draft_help(default: str | None) -> str:
    """The help text of ``--draft`` / ``--drafts`` (its import here: `spectheory gamma` loads only the theory)."""
    from decoders.drafts import DRAFT_KINDS, FROM_TARGET, SHIPPED, draft_names, own_tokenizer_drafts

    own = [f"{kind.name} for --target {kind.only_target}" for kind in DRAFT_KINDS.values() if kind.only_target]
    return (
        f"a shipped draft ({names(draft_names(SHIPPED))}{''.join('; ' + line for line in own)}), a draft built "
        f"from the target ({names(draft_names(FROM_TARGET))}), a model file "
        f"in the zoo's format, or a GGUF file or model directory with the target's tokenizer (default "
        f"{default or 'every shipped draft; ' + names(own_tokenizer_drafts()) + ' for a target with its own tokenizer'}"
        ")"
    )


def add_text(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--text",
        metavar="FILE",
        help=f"held-out UTF-8 text for {what} (default: the shipped corpus's "
        f"held-out split, read by the target's tokenizer)",
    )


#: The measured-cost flags of ``gamma`` and ``tree`` (argparse's names), besides --costs.
COST_FLAGS = ("t_step_ms", "t_draft_ms", "t_verify_ms", "t_iteration_ms")


def add_cost_flags(costs) -> None:
    """The measured costs as flags (an argument group of ``gamma`` and ``tree``), read by ``flag_costs``."""
    costs.add_argument("--t-step-ms", type=float, help="autoregressive decoder, ms per token")
    costs.add_argument("--t-draft-ms", type=float, help="one draft call (a chain's token, a tree's level), ms")
    costs.add_argument(
        "--t-verify-ms",
        type=float,
        nargs="+",
        metavar="MS",
        help="verifying k = 1, 2, ... positions, ms (gamma up to their number - 1)",
    )
    costs.add_argument(
        "--t-iteration-ms", type=float, help="accept, correct and rollback per iteration, ms (default 0)"
    )


def flag_costs(args: argparse.Namespace) -> dict:
    """The --t-* flags given, in seconds: ``t_step``, ``t_draft``, ``t_iteration`` and the list ``t_verify``."""
    costs = {
        key: getattr(args, key + "_ms") / 1e3
        for key in ("t_step", "t_draft", "t_iteration")
        if getattr(args, key + "_ms") is not None
    }
    if args.t_verify_ms is not None:
        costs["t_verify"] = [ms / 1e3 for ms in args.t_verify_ms]
    return costs
