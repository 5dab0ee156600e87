"""The servers an engine starts (decoders.engines.server.ServerPool, docs/engines.md §2): at most the plain one and
one other alive at once, each start checked against the free memory first; against a ledger of stand-in servers."""

from pathlib import Path

import pytest

from decoders.engines.server import ServerPool, available_memory, check_free_memory


class Ledger:
    """Stand-in servers that record their starts and stops, and the most alive at once."""

    def __init__(self) -> None:
        self.alive, self.started, self.most = set(), [], 0

    def start(self, key):
        ledger = self

        class Server:
            def stop(self) -> None:
                ledger.alive.discard(key)

        self.alive.add(key)
        self.started.append(key)
        self.most = max(self.most, len(self.alive))
        return Server()


def test_a_gamma_sweep_keeps_at_most_two_servers_alive_against_the_ledger():
    ledger = Ledger()
    pool = ServerPool(ledger.start, lambda key: 0, "stand-in")
    for gamma in range(1, 9):  # the greedy audit's order: plain, then each gamma beside it
        pool.get(0)
        pool.get(gamma)
        pool.get(gamma)  # asked again: the same server, no start
    pool.get("draft")
    pool.close()
    pool.get(4)
    pool.get(0)  # the plain one asked after a speculating one (an engine's tokenize): both stay
    assert set(pool.alive()) == {0, 4}
    pool.close()
    pool.get(0)
    pool.get("draft")
    assert ledger.most == 2
    assert ledger.started == [0, *range(1, 9), "draft", 4, 0, 0, "draft"]
    assert set(pool.alive()) == {0, "draft"} == ledger.alive
    pool.close()
    assert not ledger.alive and not pool.alive()


def test_no_server_starts_where_the_memory_would_not_fit():
    ledger = Ledger()
    pool = ServerPool(ledger.start, lambda key: 1 << 62, "stand-in")  # 4 EiB: more than any machine has
    with pytest.raises(ValueError, match=r"not enough free memory to start stand-in \(speculating at 4\)"):
        pool.get(4)
    assert not ledger.started


def test_free_memory_check_names_the_server_and_both_sizes():
    with pytest.raises(ValueError, match=r"vllm \(plain\): it needs about 3.0 GiB and 2.0 GiB are available"):
        check_free_memory(3 << 30, "vllm (plain)", available=2 << 30)
    check_free_memory(1 << 30, "vllm (plain)", available=2 << 30)  # fits: no error


def test_available_memory_reads_memavailable(tmp_path: Path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n")
    assert available_memory(meminfo) == 2048 * 1024
    assert available_memory(tmp_path / "absent") is None
