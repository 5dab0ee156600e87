"""Running ``spectheory`` in-process for the CLI tests."""

from spectheory.cli import main


def run(capsys, *argv):
    """(exit status, stdout, stderr) of ``spectheory *argv``."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err
