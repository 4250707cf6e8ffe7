"""`podbench compare`'s result as a person reads it: a text table, or markdown for a CI job summary. Pure.

Both take the JSON `podbench compare --json` prints (bench/cli/compare.py ``comparison``).
"""
from __future__ import annotations

from bench import humanize
from bench.cli.common import text_table
from methodology.compare import FASTER, SLOWER

_HEADER = ("", "baseline", "new", "new / baseline")


def _seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.3f} s"


def _percent(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1%}" if abs(value) >= 0.01 else f"{value:.2%}"


def _change(ratio: float) -> str:
    """A ratio as a signed change: 0.896 -> "-10.4%"."""
    return f"{ratio - 1:+.1%}"


def _fact(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "n/a" if value is None else str(value)


def rows(result: dict) -> list[tuple[str, str, str, str]]:
    """The table's rows: images/sec with its interval, step-time p50/p90, MFU, runs and intervals."""
    base, new, ratio = result["baseline"], result["new"], result["throughput_ratio"]
    out = [("images/sec", humanize.format_rate(base["images_per_sec"]), humanize.format_rate(new["images_per_sec"]),
            f"{ratio['ratio']:.3f}x"),
           (f"  {ratio['confidence']:.0%} interval", "", "", f"{ratio['low']:.3f}-{ratio['high']:.3f}x")]
    for q in ("p50", "p90"):
        out.append((f"step time {q}", _seconds(base["step_time_s"][q]), _seconds(new["step_time_s"][q]),
                    f"{result['step_time_ratio'][q]:.2f}x"))
    out.append(("MFU", _percent(base["mfu"]), _percent(new["mfu"]), ""))
    out.append(("runs", str(len(base["runs"])), str(len(new["runs"])), ""))
    out.append(("measured intervals", str(sum(r["intervals"] for r in base["runs"])),
                str(sum(r["intervals"] for r in new["runs"])), ""))
    return out


def differences_line(result: dict) -> str:
    """What differs between the runs, or that nothing does."""
    if not result["differences"]:
        return "differences: none (same benchmark, hardware, batch, precision, XLA, strategy, CPU threads, TensorFlow)"
    parts = [f"{d['label']} {'/'.join(map(_fact, d['baseline']))} -> {'/'.join(map(_fact, d['new']))}"
             + (f" (a different {d['refused_as']}: --allow-different)" if d["refused_as"] else "")
             for d in result["differences"]]
    return "differences (the comparison may be unfair): " + "; ".join(parts)


def noise_line(result: dict) -> str:
    """Where the run-to-run noise in the interval comes from, side by side."""
    parts = []
    for side in ("baseline", "new"):
        runs, measured = len(result[side]["runs"]), result[side]["measured_run_noise_sd"]
        recorded = result.get("new_run_noise") if side == "new" else None
        if side in result["assumed_for"] and recorded:
            parts.append(f"{side}: one run, {recorded['sd']:.1%} assumed (measured by {recorded['from']})")
        elif side in result["assumed_for"]:
            parts.append(f"{side}: one run, {result['assumed_run_noise_sd']:.0%} assumed (--run-noise)")
        else:
            parts.append(f"{side}: {measured:.1%} measured over its {runs} runs")
    return "run-to-run noise (SD of log throughput): " + "; ".join(parts)


def detectable_line(result: dict) -> str:
    """The smallest slowdown these runs could show, and what would lower it."""
    base, new = len(result["baseline"]["runs"]), len(result["new"]["runs"])
    return (f"detectable: a slowdown of {result['detectable_slowdown']:.1%} or more, with {base} baseline and {new} "
            f"new run(s) at this noise and --max-slowdown {result['max_slowdown']:.0%}; smaller ones pass unseen "
            "(more runs a side lower this)")


def verdict_line(result: dict) -> str:
    """The verdict, the change with its interval, and the threshold it was held to."""
    ratio, verdict = result["throughput_ratio"], result["verdict"]
    change = (f"throughput {_change(ratio['ratio'])} ({ratio['confidence']:.0%} interval "
              f"{_change(ratio['low'])} to {_change(ratio['high'])})")
    allowed = f"{result['max_slowdown']:.0%}"
    if verdict == SLOWER:
        return f"verdict: slower: {change}, more than the {allowed} --max-slowdown allows (exit code 1)"
    if verdict == FASTER:
        return f"verdict: faster: {change}"
    return f"verdict: no significant change: {change}; slower means the whole interval below {_change(1 - result['max_slowdown'])}"


def text(result: dict) -> str:
    """The comparison as an aligned text table and four lines: differences, noise, what it can detect, verdict."""
    head = (f"podbench compare: {len(result['new']['runs'])} new run(s) against "
            f"{len(result['baseline']['runs'])} baseline run(s)")
    return "\n".join([head, "", text_table(rows(result), _HEADER, lambda r: r), "",
                      differences_line(result), noise_line(result), detectable_line(result), verdict_line(result)])


def markdown(result: dict) -> str:
    """The comparison as a markdown table (for $GITHUB_STEP_SUMMARY), then the same four lines."""
    table = rows(result)
    label, _, _, interval = table.pop(1)
    table[0] = (*table[0][:3], f"**{table[0][3]}** ({label.strip()} {interval})")
    lines = [f"### podbench compare: {result['verdict']}", "", "| " + " | ".join(_HEADER) + " |",
             "|---|---:|---:|---:|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in table]
    lines += ["", differences_line(result), "", noise_line(result), "", detectable_line(result), "",
              f"**{verdict_line(result)}**", "",
              "runs: baseline " + ", ".join(r["run_id"] for r in result["baseline"]["runs"])
              + "; new " + ", ".join(r["run_id"] for r in result["new"]["runs"])]
    return "\n".join(lines)
