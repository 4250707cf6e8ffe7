"""bench/harness/update_probe.py: the step with and without its update in alternating blocks, each timed once
its last loss is on the host, whatever the engine (the JAX and torch engines' runs test it end to end)."""
from bench.harness.update_probe import WARMUP_CALLS, probe


def test_blocks_alternate_each_waits_once_for_its_last_step_and_a_stop_ends_the_probe():
    calls = []
    ticks = iter(range(0, 1000, 2))
    records = probe(lambda: calls.append("with") or "loss-with", lambda: calls.append("without") or "loss-without",
                    lambda loss: calls.append(f"wait {loss}"), rounds=2, steps=2, clock=lambda: next(ticks))
    assert [r["update"] for r in records] == [True, False, False, True]
    assert all(r["steps"] == 2 and r["seconds"] == 2 for r in records)
    # Untimed first: each step WARMUP_CALLS times (a CUDA graph records on a later call than the first), one wait.
    warm = 2 * (WARMUP_CALLS + 1)
    assert WARMUP_CALLS >= 3 and calls[:warm] == (["with"] * WARMUP_CALLS + ["wait loss-with"]
                                                  + ["without"] * WARMUP_CALLS + ["wait loss-without"])
    assert calls[warm:warm + 3] == ["with", "with", "wait loss-with"] and len(calls) == warm + 4 * 3
    asked = iter([False, True])
    stopped = probe(lambda: 1, lambda: 2, lambda loss: None, stopping=lambda: next(asked))
    assert [r["update"] for r in stopped] == [True]
