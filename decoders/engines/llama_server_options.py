"""How the llama-server engine starts its servers and what every request carries: ``ServerOptions``, parsed from
the part of ``--engine llama-server:OPTIONS`` after the colon (docs/engines.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from plumbing.validation import as_int

__all__ = ["MODEL_DRAFTS", "SPEC_TYPES", "NGRAM_LENGTH_FLAGS", "NGRAM_SIMPLE_KEY", "SAMPLER_FIELDS", "ServerOptions"]

#: Speculative types that need a draft model (-md); the ngram-* types draft from the text.
MODEL_DRAFTS = ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
SPEC_TYPES = MODEL_DRAFTS + ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
#: The flag that caps each n-gram drafter's draft length (common/arg.cpp); --spec-draft-n-max caps only the model
#: drafts and ngram-cache. ngram-simple drafts a copy only when it is at least its lookup key long (size n, 12 by
#: default; common/ngram-map.cpp), so the engine shortens its key to the draft length where it is longer.
NGRAM_LENGTH_FLAGS = {
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-map-k": "--spec-ngram-map-k-size-m",
    "ngram-map-k4v": "--spec-ngram-map-k4v-size-m",
    "ngram-mod": "--spec-ngram-mod-n-max",
}
NGRAM_SIMPLE_KEY = 12
#: llama.cpp's sampler fields of a /completion request (tools/server/server-schema.cpp) that ``field=KEY:NUMBER``
#: may set: the samplers the engines do not share, which ``completion_body`` otherwise switches off.
SAMPLER_FIELDS = (
    "typical_p",
    "top_n_sigma",
    "xtc_probability",
    "xtc_threshold",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "adaptive_target",
    "adaptive_decay",
    "frequency_penalty",
    "presence_penalty",
    "repeat_last_n",
    "dynatemp_range",
    "dynatemp_exponent",
    "min_keep",
)


def _float_or_text(value: str) -> float | str:
    """``value`` as a float where it reads as one (else as given, for the check to name)."""
    try:
        return float(value)
    except ValueError:
        return value


@dataclass(frozen=True)
class ServerOptions:
    """How the engine starts its servers: ``spec`` (a ``SPEC_TYPES`` member, by default ``ngram-simple``, the drafter
    that needs no draft model, as the in-process engine's default is prompt lookup; None, ``spec=none``: no speculation
    at any ``speculate``), ``draft`` (the -md GGUF file the model drafts need), ``draft_sampling`` (greedy: the draft's
    argmax, verified by sample-and-match; probabilistic: sampled drafts verified by rejection sampling at T > 0),
    ``draft_min`` (shorter drafts are dropped), ``slots`` (-np: requests decoded together), ``completions`` (samples per
    request, ``n_cmpl``: the prompt is evaluated once for them, at most ``slots``), ``threads`` (-t) and ``context``
    (tokens per slot); and two samplers only this engine has, sent with every request: ``mirostat`` (0 off, 1 or 2:
    llama.cpp's Mirostat version, which replaces the other truncations; ``mirostat_tau`` and ``mirostat_eta``, its
    target surprise in bits and learning rate, None for llama.cpp's 5 and 0.1) and ``grammar`` (a ``GRAMMARS`` name: the
    output constrained to it). Any other sampler of llama.cpp's chain: ``fields`` ((key, number) of ``SAMPLER_FIELDS``,
    ``field=dry_multiplier:0.8``, repeatable), ``logit_bias`` ((token, bias), ``logit-bias=12:-1.5``, repeatable) and
    ``samplers``, the chain's order (``samplers=top_k;adaptive_p``)."""

    spec: str | None = "ngram-simple"
    draft: str | None = None
    draft_sampling: str = "greedy"
    draft_min: int = 0
    slots: int = 8
    completions: int = 8  # the prompt once for 8 samples: the same rows as one request each, 2.5x as fast (docs)
    threads: int = 2
    context: int = 2048
    mirostat: int = 0
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    grammar: str | None = None
    fields: tuple = ()
    logit_bias: tuple = ()
    samplers: tuple = ()

    WORDS = {
        "spec": "spec",
        "draft": "draft",
        "sampling": "draft_sampling",
        "draft-min": "draft_min",
        "np": "slots",
        "completions": "completions",
        "threads": "threads",
        "context": "context",
        "mirostat": "mirostat",
        "mirostat-tau": "mirostat_tau",
        "mirostat-eta": "mirostat_eta",
        "grammar": "grammar",
        "field": "fields",
        "logit-bias": "logit_bias",
        "samplers": "samplers",
    }
    INTEGERS = ("draft_min", "slots", "completions", "threads", "context", "mirostat")
    FLOATS = ("mirostat_tau", "mirostat_eta")
    #: Grammars by name, sent as the request's json_schema (the server turns a schema into a grammar).
    GRAMMARS = {"json": {"type": "object"}}

    def __post_init__(self) -> None:

        if self.spec is not None and self.spec not in SPEC_TYPES:
            raise ValueError(f"llama-server spec must be one of {', '.join(SPEC_TYPES)} or none, got {self.spec!r}")
        if (self.spec in MODEL_DRAFTS) != (self.draft is not None):
            raise ValueError(
                f"llama-server: spec {self.spec} {'needs' if self.spec in MODEL_DRAFTS else 'takes no'} draft=FILE.gguf"
            )
        if self.draft is not None and not Path(self.draft).is_file():
            raise ValueError(f"llama-server draft {self.draft!r} is not a file")
        if self.draft_sampling not in ("greedy", "probabilistic"):
            raise ValueError(f"llama-server sampling must be greedy or probabilistic, got {self.draft_sampling!r}")
        as_int("draft_min", self.draft_min, low=0, high=64)
        as_int("slots", self.slots, low=1, high=64)
        as_int("completions", self.completions, low=1, high=self.slots)
        as_int("threads", self.threads, low=1, high=512)
        as_int("context", self.context, low=64, high=1 << 20)
        as_int("mirostat", self.mirostat, low=0, high=2)
        for name in self.FLOATS:
            value = getattr(self, name)
            if value is not None and not self.mirostat:
                raise ValueError(f"llama-server {name.replace('_', '-')} needs mirostat=1 or mirostat=2")
            if value is not None and not (isinstance(value, float) and 0 < value < 100):
                raise ValueError(f"llama-server {name.replace('_', '-')} must be a number in (0, 100), got {value!r}")
        for key, value in self.fields:
            if key not in SAMPLER_FIELDS or not isinstance(value, float):
                raise ValueError(
                    f"llama-server field must be KEY:NUMBER with KEY one of {', '.join(SAMPLER_FIELDS)}, "
                    f"got {key}:{value}"
                )
        for token, bias in self.logit_bias:
            if not isinstance(token, int) or token < 0 or not isinstance(bias, float):
                raise ValueError(
                    f"llama-server logit-bias must be TOKEN:BIAS (an id >= 0 and a number), got {token}:{bias}"
                )
        if self.grammar is not None and self.grammar not in self.GRAMMARS:
            raise ValueError(f"llama-server grammar must be one of {', '.join(self.GRAMMARS)}, got {self.grammar!r}")

    @classmethod
    def parse(cls, words: str) -> "ServerOptions":
        """Options from ``spec=draft-simple,draft=D.gguf,sampling=probabilistic,np=4,threads=2`` (the part of
        ``--engine llama-server:...`` after the colon)."""
        values = {}
        for word in filter(None, words.split(",")):
            key, equals, value = word.partition("=")
            if not equals or key not in cls.WORDS:
                raise ValueError(
                    f"llama-server options are {', '.join(k + '=' for k in cls.WORDS)} separated by "
                    f"commas, got {word!r}"
                )
            field = cls.WORDS[key]
            if field in ("fields", "logit_bias"):  # KEY:VALUE pairs, repeatable
                name, _, number = value.partition(":")
                name = int(name) if field == "logit_bias" and name.isdigit() else name
                values[field] = values.get(field, ()) + ((name, _float_or_text(number)),)
                continue
            if field == "samplers":
                values[field] = tuple(filter(None, value.split(";")))
                continue
            if field == "spec" and value == "none":
                values[field] = None
                continue
            values[field] = (
                int(value)
                if field in cls.INTEGERS and value.isdigit()
                else _float_or_text(value)
                if field in cls.FLOATS
                else value
            )
        return cls(**values)

    def request_fields(self) -> dict:
        """What every request carries beyond ``completion_body``: the engine's own samplers where they are on."""
        return {
            **({"mirostat": self.mirostat} if self.mirostat else {}),
            **{name: getattr(self, name) for name in self.FLOATS if getattr(self, name) is not None},
            **({"json_schema": self.GRAMMARS[self.grammar]} if self.grammar else {}),
            **dict(self.fields),
            **({"logit_bias": [list(pair) for pair in self.logit_bias]} if self.logit_bias else {}),
            **({"samplers": list(self.samplers)} if self.samplers else {}),
        }

    def sampler_words(self) -> list:
        """The samplers set beyond the engines' common ones, in words for the engine's name (``mirostat 2 tau 2 eta
        2``, ``grammar json``, ``dry_multiplier 0.8``, ...)."""
        mirostat = [f"mirostat {self.mirostat}"] + [
            f"{name[9:]} {getattr(self, name):g}" for name in self.FLOATS if getattr(self, name) is not None
        ]
        return (
            ([" ".join(mirostat)] if self.mirostat else [])
            + [f"grammar {self.grammar}"] * bool(self.grammar)
            + [f"{key} {value:g}" for key, value in self.fields]
            + [f"logit bias {dict(self.logit_bias)}"] * bool(self.logit_bias)
            + [f"samplers {' '.join(self.samplers)}"] * bool(self.samplers)
        )

    def arguments(self, model: str, speculate: int) -> list:
        """llama-server's flags for ``model`` drafting up to ``speculate`` tokens (0: no speculation), by each
        drafter's own length flag (``NGRAM_LENGTH_FLAGS``)."""
        flags = [
            "-m",
            model,
            "-np",
            str(self.slots),
            "-t",
            str(self.threads),
            "-c",
            str(self.context * self.slots),
            "--no-cache-prompt",
            "--no-webui",
        ]
        if speculate and self.spec is not None:
            flags += [
                "--spec-type",
                self.spec,
                "--spec-draft-n-max",
                str(speculate),
                "--spec-draft-n-min",
                str(self.draft_min),
            ]
            if self.spec in NGRAM_LENGTH_FLAGS:
                flags += [NGRAM_LENGTH_FLAGS[self.spec], str(speculate)]
            if self.spec == "ngram-simple":
                flags += ["--spec-ngram-simple-size-n", str(min(speculate, NGRAM_SIMPLE_KEY))]
            if self.draft is not None:
                flags += ["-md", self.draft, "--spec-draft-sampling", self.draft_sampling]
        return flags
