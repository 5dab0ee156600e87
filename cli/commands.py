"""The commands of ``spectheory``, in the order of its help."""

__all__ = ["COMMANDS"]

#: name -> one-line summary; the command's module is ``cli.<name>``.
COMMANDS = {
    "gamma": "optimal gamma, expected tokens, speedup and operations for given alpha and c",
    "tree": "the optimal draft tree under a node budget: expected tokens, speedup, the best chain beside it",
    "simulate": "Monte-Carlo tokens per iteration and speedup, beside their closed forms",
    "audit": "prove or test that a decoder samples exactly the target's distribution",
    "conformance": "where speculation changes what an engine returns: greedy tokens, sampled law, logprobs, seeds",
    "train": "train the shipped target and drafts on the stdlib corpus (seeded, resumable)",
    "alpha": "measured acceptance rate alpha of the shipped drafts (Table 3 analogue)",
    "bench": "measure c, tokens per iteration and speedup of the shipped pair against Theorem 3.8",
    "profile": "measure the cost profile of a pair (t_step, t_draft, t_verify(k), t_iteration, acceptance)",
    "schedule": "draft length per batch size from cost profiles at several batch sizes, in the engines' settings",
    "diverge": "where an engine's greedy output leaves ours, the target's margin there: numerics or a bug",
    "figs": "regenerate the papers' figures and tables (PNG and PDF; Markdown and CSV) from cached results",
    "report": "the main job: measure a target/draft pair, recommend gamma, audit, benchmark, write report.md/.html",
    "device-check": "the prepared GPU check: decoders on the device, cost profiles of SmolLM2-shaped models",
    "export-gguf": "write a llama GGUF through its first K blocks: a draft model for llama-server (-md)",
    "export-hf": "write the shipped pair as Hugging Face model directories (GPT-2 weights, character tokenizer)",
}
