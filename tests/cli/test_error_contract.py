"""The error contract, case by case: every bad input that once gave a traceback, a memory blow-up or a silent
wrong answer is run again exactly as it was first tried. Each must exit 2 with one line on stderr, before any
long work, leaving no output behind; valid input at a limit (``gamma --alpha 1 --json``) gives its result.
The library's cases (exception type and message) sit beside the code they exercise: ``test_decoders.py``,
``test_zoo.py``, ``test_train.py``, ``test_audit.py``, ``test_speedup.py``."""

import subprocess
import sys

import pytest
import torch
from command import interrupt_after, run, start_interruptible

from decoders import zoo

NO_CUDA = not torch.cuda.is_available()


def _model_file(folder, how: str) -> str:
    """The shipped transformer draft saved with one defect."""
    entries = torch.load(zoo.ZOO / "transformer.pt", weights_only=True)
    config, weights = dict(entries["config"]), dict(entries["weights"])
    if how == "nan":
        weights = {name: torch.full_like(value, torch.nan) for name, value in weights.items()}
    elif how == "extra":
        config["extra"] = 1
    elif how == "shapes":
        weights["embed.weight"] = weights["embed.weight"][:, :5]
    elif how == "config":
        config = [1, 2]
    path = folder / f"{how}.pt"
    torch.save({"config": config, "weights": weights}, path)
    return str(path)


CASES = {  # name -> (argv, fragment of the one line); {model:how} is a defective model file, {file} an existing file
    "gamma 1e9 allocates until killed": (
        ["simulate", "--alpha", "0.8", "--gamma", "1000000000", "--n", "100"],
        "gamma must be an integer in [1, 1024], got 1000000000",
    ),
    "large --vocabulary": (
        ["simulate", "--process", "token-level", "--alpha", "0.8", "--gamma", "4", "--vocabulary", "10000000"],
        "vocabulary must be an integer in [1, 10000], got 10000000",
    ),
    "large --windows": (["alpha", "--windows", "1000000"], "windows must be an integer in [2, 10000], got 1000000"),
    "audit --exact --horizon 12": (
        ["audit", "--exact", "--horizon", "12"],
        "V^horizon = 5^12 sequences, more than 100,000",
    ),
    "NaN draft gave alpha 0 and PASS": (["report", "--draft", "{model:nan}"], "weights must be finite"),
    "alpha --windows 1 wrote NaN": (["alpha", "--windows", "1", "--out", "f"], "windows must be an integer in [2"),
    "report --windows 1 failed after the work": (["report", "--windows", "1"], "windows must be an integer in [2"),
    "bench --out is a directory": (["bench", "--out", "."], "exists and is not a file"),
    "profile --out under a file": (["profile", "--out", "{file}/profile.json"], "cannot be written"),
    "alpha --out under a read-only place": (["alpha", "--out", "/proc/spectheory/alpha.json"], "cannot be written"),
    "report --out is a file": (["report", "--out", "{file}"], "exists and is not a directory"),
    "figs --out is a file": (["figs", "--out", "{file}"], "exists and is not a directory"),
    "train --work under a read-only place": (["train", "ngrams", "--work", "/proc/spectheory"], "cannot be written"),
    "--device foo": (["alpha", "--device", "foo"], "'foo' is not a torch device"),
    "zoo file with an extra config key": (["profile", "--draft", "{model:extra}"], "config has unknown keys ['extra']"),
    "zoo file with wrong shapes": (["report", "--draft", "{model:shapes}"], "size mismatch for embed.weight"),
    "zoo file whose config is not a dict": (["profile", "--target", "{model:config}"], "config must be a dictionary"),
    "--hf-gamma 0 silently replaced": (["bench", "--hf", "--hf-gamma", "0"], "hf_gamma must be a positive integer"),
    "--lenience ignored by the iid process": (
        ["simulate", "--alpha", "0.8", "--gamma", "4", "--lenience", "0.5"],
        "lenience applies to the token-level process only",
    ),
    # found beyond the list
    "bench --prompts unbounded": (["bench", "--prompts", "100000000"], "prompts must be an integer in [1, 1024]"),
    "bench --repeats unbounded": (["bench", "--repeats", "1000000000"], "repeats must be an integer in [1, 100]"),
    "report --audit-n unbounded": (["report", "--audit-n", "1000000000"], "audit_n must be an integer in [2, 1000000]"),
    "audit --n unbounded": (["audit", "--n", "10000000000"], "n must be an integer in [2, 1000000]"),
    "profile --batch-size above the prompts measured batch 8": (
        ["profile", "--batch-size", "1000000"],
        "batch_size must be an integer in [1, 8]",
    ),
    "profile --batch-size 3 mixed batches of 3 and 2": (
        ["profile", "--batch-size", "3"],
        "batch_size must divide the 8 prompts, got 3",
    ),
    "bench --hf-gamma without --hf was ignored": (["bench", "--hf-gamma", "3"], "add --hf"),
    "bench --hf dropped the penalties": (
        ["bench", "--hf", "--repetition-penalty", "1.3"],
        "--hf compares at --temperatures only",
    ),
    "bench --engine dropped the bias": (
        ["bench", "--engine", "llama-cpp", "--logit-bias", "1=2"],
        "--engine compares at --temperatures only",
    ),
    "bench --engine benched greedy whatever --temperatures said": (
        ["bench", "--engine", "llama-cpp", "--temperatures", "0", "1"],
        "--engine benches one temperature at a time",
    ),
    "bench --engine sampled Spec-Bench's greedy table": (
        ["bench", "--engine", "llama-cpp", "--task", "spec-bench", "--temperatures", "1"],
        "its Spec-Bench table and --against servers greedy only",
    ),
    "bench --against without --engine was ignored": (["bench", "--against", "http://127.0.0.1:1"], "add --engine"),
    "bench --concurrency without --engine": (["bench", "--concurrency", "1", "4"], "our decoders' batch sweep is"),
    "bench --concurrency at two gammas would start two servers each": (
        ["bench", "--engine", "vllm", "--concurrency", "1", "4", "--gammas", "2", "4"],
        "--concurrency benches one gamma, got --gammas 2 4",
    ),
    "bench --concurrency sampled": (
        ["bench", "--engine", "vllm", "--concurrency", "1", "--temperatures", "1"],
        "--concurrency runs greedy requests",
    ),
    "bench --requests without --concurrency was ignored": (["bench", "--requests", "8"], "add --concurrency"),
    "bench --concurrency without 1 left the forecast nothing to time a prefill by": (
        ["bench", "--engine", "vllm", "--concurrency", "4", "8"],
        "must include 1",
    ),
    "bench --concurrency 0": (["bench", "--engine", "vllm", "--concurrency", "0"], "concurrency must be"),
    "bench --forecast-prompts with --tree was ignored": (
        ["bench", "--tree", "--forecast-prompts", "2"],
        "do not take it",
    ),
    "bench --forecast-prompts negative": (
        ["bench", "--forecast-prompts", "-1"],
        "forecast_prompts must be an integer in [0, 1024]",
    ),
    "bench --cross-vocabulary with an unknown method": (
        ["bench", "--cross-vocabulary", "slrx"],
        "--cross-vocabulary slrx: the methods are slem, tli, slrs",
    ),
    "report --cross-vocabulary with an unknown method": (
        ["report", "--target", "smollm2", "--cross-vocabulary", "slrx"],
        "--cross-vocabulary slrx: the methods are slem, tli, slrs",
    ),
    "bench --cross-vocabulary with --tree": (["bench", "--cross-vocabulary", "tli", "--tree"], "drop --tree"),
    "bench --cross-vocabulary with the shipped pair's one tokenizer": (
        ["bench", "--cross-vocabulary", "tli"],
        "the draft reads the target's own tokens",
    ),
    "bench --forecast-repeats 0": (
        ["bench", "--forecast-prompts", "2", "--forecast-repeats", "0"],
        "forecast_repeats must be a positive integer",
    ),
}
if NO_CUDA:
    CASES["--device cuda without CUDA"] = (["bench", "--device", "cuda"], "this machine has 0 CUDA devices")


@pytest.fixture
def module_calls(monkeypatch) -> list:
    """The class names of every torch module called from now on: a model run (or trained) before an input check
    is the long work the check must come before. Counted, not timed, so a busy machine changes nothing."""
    calls, original = [], torch.nn.Module.__call__
    monkeypatch.setattr(
        torch.nn.Module,
        "__call__",
        lambda module, *args, **kwargs: calls.append(type(module).__name__) or original(module, *args, **kwargs),
    )
    return calls


def test_module_calls_counted_against_a_valid_audit(module_calls, capsys):
    """The control: a valid exact audit runs the tiny target, and the count sees it."""
    status, out, err = run(capsys, "audit", "--exact", "--horizon", "1")
    assert status == 0 and "PASS" in out and "Linear" in module_calls, (status, err, module_calls[:3])


@pytest.mark.parametrize("case", CASES)
def test_bad_input_against_error_contract(case, tmp_path, monkeypatch, capsys, module_calls):
    argv, fragment = CASES[case]
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "file").write_text("not a directory")
    argv = [word.replace("{file}", str(inputs / "file")) for word in argv]
    argv = [_model_file(inputs, word[7:-1]) if word.startswith("{model:") else word for word in argv]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # relative outputs (report/, f, figures/) would land here
    status, out, err = run(capsys, *argv)
    assert status == 2, (status, err)
    assert err.count("\n") == 1 and fragment in err, err
    assert list(work.iterdir()) == [], "output left behind"
    assert module_calls == [], f"checked only after running a model: {module_calls[:3]}"


def test_gamma_alpha_one_json_against_theory(capsys):
    """Valid input at the limit gives the correct result: alpha = 1 has an unbounded oracle speedup (null)."""
    status, out, err = run(capsys, "gamma", "--alpha", "1", "--json")
    assert status == 0 and err == "" and '"oracle_speedup": null' in out


def test_train_with_corrupt_checkpoint_against_error_contract(tmp_path, capsys):
    (tmp_path / "transformer.pt").write_bytes(b"garbage")
    status, out, err = run(
        capsys, "train", "transformer", "--work", str(tmp_path), "--zoo", str(tmp_path / "zoo"), "--until", "1"
    )
    assert status == 2 and err.count("\n") == 1 and "cannot be read (UnpicklingError)" in err
    assert not (tmp_path / "zoo").exists()


def test_figs_with_result_missing_a_key_against_error_contract(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "lenience.json").write_text('{"windows": 32}')
    status, out, err = run(
        capsys, "figs", "--only", "table5_lenience", "--results", str(results), "--out", str(tmp_path / "figures")
    )
    assert (
        status == 2 and err.count("\n") == 1 and "lacks what paper_figs.table5_lenience draws (KeyError: 'rows')" in err
    )
    assert not (tmp_path / "figures").exists()


def test_ctrl_c_against_error_contract(tmp_path):
    """SIGINT during a long command: exit 130 with one line, no traceback (a billion iterations take minutes).
    The signal goes once the command has used 1.5 CPU seconds, several times its imports (about 0.2 s), so it
    lands in the long work however busy the machine is."""
    process = start_interruptible(
        [sys.executable, "-m", "cli", "simulate", "--alpha", "0.8", "--gamma", "4", "--n", "1000000000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    interrupt_after(process, 1.5)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err == "spectheory simulate: interrupted\n" and out == ""


@pytest.mark.parametrize(
    "failure",
    [
        MemoryError(),
        RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate "
            "80000000000 bytes. Error code 12 (Cannot allocate memory)"
        ),
    ],
)
def test_out_of_memory_exit_3_against_the_verdicts(capsys, monkeypatch, failure):
    """A run that exhausts memory (once: the exact tree audit under an 8 GB limit, torch's allocator traceback and
    exit 1, an audit's FAIL) exits 3 with one line: neither a verdict (0, 1) nor bad input (2)."""
    from cli import audit, main

    def exhausted(args):
        raise failure

    monkeypatch.setattr(audit, "run", exhausted)
    assert main(["audit"]) == 3
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "out of memory" in err, err


def test_other_runtime_errors_against_out_of_memory(monkeypatch):
    """Control: a RuntimeError that is not the allocator's is not dressed up as one."""
    from cli import audit, main

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(audit, "run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["audit"])
