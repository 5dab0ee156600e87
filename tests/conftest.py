"""Hypothesis profiles: CI (CI=true) runs derandomised, so a failure there reproduces exactly. Every JSON file a
test writes under pytest's temporary directories is parsed strictly when the session ends (no NaN/Infinity)."""

import os

# Before torch loads OpenMP: idle threads sleep instead of spinning. On a machine whose cores other processes
# keep busy, spinning threads burn their time slices waiting for each other (the suite then took 10 times
# its CPU time); sleeping ones cost a few percent when the machine is idle (docs/project.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest
from hypothesis import HealthCheck, settings

from command import not_strict_json

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def every_json_written_is_strict(tmp_path_factory):
    """After the whole session: every JSON file the tests wrote parses strictly (the project's JSON contract)."""
    yield
    refused = not_strict_json(tmp_path_factory.getbasetemp())
    assert not refused, "JSON written by the tests is not strict:\n" + "\n".join(refused)
