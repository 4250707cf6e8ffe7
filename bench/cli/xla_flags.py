"""XLA_FLAGS checked before a JAX process starts: every flag XLA refuses is named, with its value.

XLA reads XLA_FLAGS when its first backend starts, and refuses a bad one by ending the process: a C++
abort (``F... parse_flags_from_env.cc] Check failed: tsl::Flags::Parse``) followed by a 90-line dump of
its flags, or, for a value its parser took but its backend cannot use, a RuntimeError from JAX. So a
probe process starts XLA's CPU backend with the user's XLA_FLAGS (its CPU backend is in every jaxlib,
and XLA registers every flag, GPU ones included, in every build: a GPU VM's flags are checked on any
machine), and what it printed is read for every form of refusal XLA and tsl print (jaxlib 0.10's
libjax_common.so, debug_options_flags.cc, command_line_flags.cc, parse_flags_from_env.cc):

- ``Unknown flag(s) in XLA_FLAGS: --a=1 --b=2``: names XLA does not know;
- ``Couldn't interpret value V for flag NAME.``: a value of the wrong type (an int32 given ``abc``);
- ``Illegal value for --NAME 'V'``, ``Illegal value for NAME 'V': why``, ``Illegal value for --xla_fuel.
  Saw ...``: a value outside a flag's own set;
- ``Could not open file "X" to read flags for environment variable "XLA_FLAGS"``: XLA_FLAGS not
  starting with ``--`` is read as the name of a file of flags;
- ``Flag parsing failed`` naming no flag (an enum flag given a name it lacks), or a probe that died any
  other way (``--xla_force_host_platform_device_count=0``: JAX's "Could not determine process_index"):
  each flag is then tried alone to name the one refused, after a probe without XLA_FLAGS has shown that
  the backend starts without them (else the flags are not the cause, and the run says what it finds).

A flag whose value XLA's parser accepts but that means nothing usable is checked before any probe:
``xla_force_host_platform_device_count`` below 1 (``BOUNDS``).
"""
from __future__ import annotations

import re
import signal
import subprocess
from dataclasses import dataclass
from typing import Mapping

from bench import interpreter
from bench.errors import UsageError

# The probe imports JAX through bench/train_jax/packages.py (a broken JAX is said as such, marked, not blamed
# on XLA_FLAGS), then starts XLA's CPU backend.
BROKEN_JAX = "podbench-probe: "
PROBE = ("import sys\nfrom bench.errors import UsageError\nfrom bench.train_jax import packages\n"
         "try:\n    packages.load(('jax',))\nexcept UsageError as err:\n"
         f"    print({BROKEN_JAX!r} + str(err), file=sys.stderr)\n    sys.exit(3)\n"
         "import jax\njax.devices('cpu')\n")
PROBE_TIMEOUT_S = 120
MOST_FLAGS_TRIED_ALONE = 16  # a refusal that names no flag: each of the first this many is tried alone
FIX = "correct it, or unset XLA_FLAGS"
# A glog line's prefix: severity, date, time, thread, file:line].
_GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")
_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (.*)")
_UNREADABLE = re.compile(r"Couldn't interpret value (.*) for flag (\w+)\.")
_ILLEGAL = re.compile(r"Illegal value for (?:--)?(\w+)(.*)")
_NO_FILE = re.compile(r'Could not open file "(.*)" to read flags for environment variable "XLA_FLAGS"')
_PARSE_FAILED = "Flag parsing failed"


@dataclass(frozen=True)
class Bound:
    """The least value a whole-number flag means something at, and what it is."""

    least: int
    what: str


# Values XLA's parser takes but its backend cannot use (the probe would end in JAX's own words, which blame
# neither the flag nor the value): said before any probe.
BOUNDS = {
    "xla_force_host_platform_device_count": Bound(1, "the number of devices XLA's CPU backend makes; "
                                                     "podbench's --replicas N splits a CPU into N without it"),
}


@dataclass(frozen=True)
class Probe:
    """What a probe process printed and how it ended (returncode: negative for a signal)."""

    returncode: int
    stderr: str


def check(environ: Mapping[str, str]) -> None:
    """Raises UsageError naming the flag XLA refuses in ``environ``'s XLA_FLAGS (nothing where it is unset).

    Raises:
      UsageError: a flag out of its bounds, a flag XLA refused (named, with its value), or a JAX whose import
        fails (bench/train_jax/packages.py's line).
    """
    flags = environ.get("XLA_FLAGS", "").strip()
    if flags:
        check_bounds(flags)
        check_probed(environ)


def check_probed(environ: Mapping[str, str]) -> None:
    """The probe's part of ``check``: XLA_FLAGS (set) given to XLA's CPU backend, each refusal named.

    Raises:
      UsageError: as ``check``.
    """
    flags = environ["XLA_FLAGS"].strip()
    done = probe(environ)
    if done is None or done.returncode == 0:
        return  # nothing learnt (it could not run), or XLA took every flag
    broken = [line for line in done.stderr.splitlines() if line.startswith(BROKEN_JAX)]
    if broken:
        raise UsageError(broken[0][len(BROKEN_JAX):])
    said = refusal(done.stderr, flags)
    if said is not None:
        raise UsageError(said)
    without = probe({k: v for k, v in environ.items() if k != "XLA_FLAGS"})
    if without is None or without.returncode != 0:
        return  # the backend does not start without them either: not the flags' doing; the run says what it is
    alone = refused_alone(flags.split(), environ)
    why = first_line(done)
    if alone is None:
        raise UsageError(f"XLA refused XLA_FLAGS={flags[:200]} ({why}): {FIX}")
    raise UsageError(f"XLA refused {alone} in XLA_FLAGS ({why}): {FIX}")


def check_bounds(flags: str) -> None:
    """Raises UsageError for a flag of ``BOUNDS`` given a whole number below its least."""
    for name, value in re.findall(r"--(\w+)=(\S*)", flags):
        bound = BOUNDS.get(name)
        if bound is not None and re.fullmatch(r"[+-]?\d+", value) and int(value) < bound.least:
            raise UsageError(f"XLA_FLAGS gives --{name}={value}, below {bound.least}: it is {bound.what}; "
                             f"give {bound.least} or more, or unset XLA_FLAGS")


def probe(environ: Mapping[str, str]) -> Probe | None:
    """Starts XLA's CPU backend in a separate process with ``environ`` (a second or two): a flag XLA refuses
    ends that process, not the run. None where it could not run or did not end in time."""
    env = {**environ, "JAX_PLATFORMS": "cpu"}
    try:
        done = subprocess.run(interpreter.code_argv(PROBE), capture_output=True, text=True, env=env,
                              timeout=PROBE_TIMEOUT_S, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Probe(done.returncode, done.stderr)


def refusal(stderr: str, flags: str) -> str | None:
    """The line for a refusal XLA named in a probe's ``stderr`` (pure); None where it named none."""
    lines = [_GLOG.sub("", line).strip() for line in stderr.splitlines()]
    for line in lines:
        if match := _UNKNOWN.search(line):
            return f"XLA_FLAGS holds a flag XLA does not know ({match.group(1).strip()[:200]}): {FIX}"
        if match := _UNREADABLE.search(line):
            value, name = match.groups()
            return (f"XLA_FLAGS gives --{name} a value XLA cannot read ({value!r}){_takes(name, stderr)}: "
                    f"{FIX}")
        if match := _ILLEGAL.search(line):
            name = match.group(1)
            return f"XLA refused --{name}{_given(name, flags)} in XLA_FLAGS ({line[:200]}): {FIX}"
        if match := _NO_FILE.search(line):
            return (f"XLA_FLAGS={flags[:120]} does not start with --, so XLA reads it as the name of a file of "
                    f"flags, and there is no such file: give flags as --name=value, or the path of a file of them")
    return None


def _given(name: str, flags: str) -> str:
    """``=VALUE`` as XLA_FLAGS gives flag ``name``, or nothing."""
    match = re.search(rf"--{re.escape(name)}(=\S*)", flags)
    return match.group(1) if match else ""


def _takes(name: str, stderr: str) -> str:
    """What the flag takes, from XLA's own dump of its flags (``--NAME=DEFAULT<tab>TYPE<tab>...``)."""
    match = re.search(rf"^\s*--{re.escape(name)}=(\S*)\s+(\w+)\t", stderr, re.MULTILINE)
    return f": it takes {match.group(2)}, {match.group(1) or 'empty'} by default" if match else ""


def first_line(done: Probe) -> str:
    """The first meaningful line a probe that died printed: XLA's own error or fatal line, else a Python
    exception's, else how it ended."""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    for line in lines:
        if _PARSE_FAILED in line:
            return "XLA's flag parser refused it, saying no more"
        if re.match(r"^[EF]\d{4} ", line):
            return _shortened(_GLOG.sub("", line))
    exceptions = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    if exceptions:
        return _shortened(re.sub(r"\s*\(set JAX_PLATFORMS=.*$", "", exceptions[-1]))
    if done.returncode < 0:
        try:
            return f"it died of {signal.Signals(-done.returncode).name}"
        except ValueError:
            return f"it died of signal {-done.returncode}"
    return _shortened(lines[0]) if lines else f"it ended with exit code {done.returncode}, saying nothing"


def refused_alone(tokens: list[str], environ: Mapping[str, str]) -> str | None:
    """The first of ``tokens`` that a probe with it alone as XLA_FLAGS refuses (None: none alone)."""
    if len(tokens) == 1:
        return tokens[0]
    for token in tokens[:MOST_FLAGS_TRIED_ALONE]:
        done = probe({**environ, "XLA_FLAGS": token})
        if done is not None and done.returncode != 0:
            return token
    return None


def _shortened(text: str, most: int = 240) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"
