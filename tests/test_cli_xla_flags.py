"""bench/cli/xla_flags.py: every flag XLA refuses in XLA_FLAGS named with its value, before a JAX process starts.

The refusal forms are read from what XLA prints (jaxlib 0.10's own lines, quoted below as it printed them);
the probe itself runs for real where the form names no flag (each flag tried alone). Through the console
script: tests/test_train_jax_run.py (`podbench run --framework jax` under each form).
"""
import os

import pytest

from bench.cli import xla_flags
from bench.errors import UsageError
from console import JAXLIB_MISMATCH, broken_jax

CHECK_FAILED = ("F1128 08:29:41.979725    1534 parse_flags_from_env.cc:220] Check failed: tsl::Flags::Parse(&env_argv->"
                "argc, env_argv->argv.data(), flag_list) Flag parsing failed.\n")
DUMP = ("Flags:\n\t--xla_cpu_enable_fast_math=false \tbool\tEnable unsafe fast-math optimizations in the CPU compiler\n"
        "\t--xla_force_host_platform_device_count=1\tint32\tForce the host platform to pretend that there are these "
        "many host \"devices\".\n")


@pytest.mark.parametrize("stderr, flags, line", [
    pytest.param("F1128 08:29:50.747991    1657 parse_flags_from_env.cc:234] Unknown flags in XLA_FLAGS: --xla_foo=1 "
                 "--xla_bar=2\n", "--xla_foo=1 --xla_bar=2",
                 "XLA_FLAGS holds a flag XLA does not know (--xla_foo=1 --xla_bar=2): correct it, or unset XLA_FLAGS",
                 id="unknown_names"),
    pytest.param("E1128 08:28:55.142567     364 command_line_flags.cc:63] Couldn't interpret value abc for flag "
                 "xla_force_host_platform_device_count.\n" + CHECK_FAILED + "usage: --x\n" + DUMP,
                 "--xla_force_host_platform_device_count=abc",
                 "XLA_FLAGS gives --xla_force_host_platform_device_count a value XLA cannot read ('abc'): it takes "
                 "int32, 1 by default: correct it, or unset XLA_FLAGS", id="a_value_of_the_wrong_type"),
    pytest.param("E1128 08:29:41.979668    1534 command_line_flags.cc:93] Couldn't interpret value maybe for flag "
                 "xla_cpu_enable_fast_math.\n" + CHECK_FAILED + DUMP, "--xla_cpu_enable_fast_math=maybe",
                 "XLA_FLAGS gives --xla_cpu_enable_fast_math a value XLA cannot read ('maybe'): it takes bool, false "
                 "by default: correct it, or unset XLA_FLAGS", id="a_bool_given_a_word"),
    pytest.param("E1128 08:29:39.051227    1511 debug_options_flags.cc:145] Illegal value for "
                 "--xla_gpu_enable_command_buffer 'FOO'\n" + CHECK_FAILED, "--xla_gpu_enable_command_buffer=FOO",
                 "XLA refused --xla_gpu_enable_command_buffer=FOO in XLA_FLAGS (Illegal value for "
                 "--xla_gpu_enable_command_buffer 'FOO'): correct it, or unset XLA_FLAGS", id="outside_its_set"),
    pytest.param("E1128 08:29:37.524972    1504 debug_options_flags.cc:843] Illegal value for --xla_fuel. Saw abc, but "
                 "expected token abc to have format X=INTEGER.\n" + CHECK_FAILED, "--xla_gpu_autotune_level=0 "
                 "--xla_fuel=abc", "XLA refused --xla_fuel=abc in XLA_FLAGS (Illegal value for --xla_fuel. Saw abc, "
                 "but expected token abc to have format X=INTEGER.): correct it, or unset XLA_FLAGS",
                 id="a_value_of_the_wrong_form"),
    pytest.param("F1128 08:29:46.794129    1555 parse_flags_from_env.cc:171] Could not open file \"xla_dump_to=x\" to "
                 "read flags for environment variable \"XLA_FLAGS\". (We assumed \"xla_dump_to=x\" was a file name "
                 "because it did not start with a \"--\".)\n", "xla_dump_to=x",
                 "XLA_FLAGS=xla_dump_to=x does not start with --, so XLA reads it as the name of a file of flags, and "
                 "there is no such file: give flags as --name=value, or the path of a file of them", id="not_flags"),
    pytest.param(CHECK_FAILED + "usage: --xla_gpu_detect_nan=foo\n" + DUMP, "--xla_gpu_detect_nan=foo", None,
                 id="no_flag_named"),
])
def test_each_refusal_xla_prints_is_named_with_its_value(stderr, flags, line):
    assert xla_flags.refusal(stderr, flags) == line


def test_the_first_meaningful_line_of_a_probe_that_died_otherwise():
    died = xla_flags.Probe(1, "Traceback (most recent call last):\n  File \"x\", line 1\n    bs = backends()\n"
                              "RuntimeError: Unable to initialize backend 'cpu': INVALID_ARGUMENT: Could not determine "
                              "process_index for this process (set JAX_PLATFORMS='' to automatically choose an "
                              "available backend)\n")
    assert xla_flags.first_line(died) == ("RuntimeError: Unable to initialize backend 'cpu': INVALID_ARGUMENT: Could "
                                          "not determine process_index for this process")
    assert xla_flags.first_line(xla_flags.Probe(1, CHECK_FAILED + DUMP)) == ("XLA's flag parser refused it, saying "
                                                                             "no more")
    assert xla_flags.first_line(xla_flags.Probe(-11, "")) == "it died of SIGSEGV"
    assert xla_flags.first_line(xla_flags.Probe(3, "")) == "it ended with exit code 3, saying nothing"


@pytest.mark.parametrize("flags, fragment", [
    ("--xla_force_host_platform_device_count=0", "--xla_force_host_platform_device_count=0, below 1: it is the number "
                                                 "of devices XLA's CPU backend makes"),
    ("--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=-2", "=-2, below 1"),
])
def test_a_device_count_below_one_says_what_is_wrong_with_it(flags, fragment):
    with pytest.raises(UsageError, match=fragment):
        xla_flags.check_bounds(flags)
    xla_flags.check_bounds("--xla_force_host_platform_device_count=2")  # one or more: XLA's to judge


def test_a_value_xla_parses_but_cannot_use_is_named_from_the_probe_alone():
    """The bounds aside: ``=0`` passes XLA's parser and ends JAX's CPU backend with words that blame neither the
    flag nor JAX_FLAGS; the backend starts without the flags, so the flag tried alone is named, in JAX's words."""
    environ = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=0"}
    with pytest.raises(UsageError, match=r"^XLA refused --xla_force_host_platform_device_count=0 in XLA_FLAGS "
                                         r"\(RuntimeError: Unable to initialize backend 'cpu'"):
        xla_flags.check_probed(environ)


def test_a_flag_refused_without_a_name_is_found_by_trying_each_alone():
    environ = {**os.environ, "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_gpu_detect_nan=foo"}
    with pytest.raises(UsageError, match=r"^XLA refused --xla_gpu_detect_nan=foo in XLA_FLAGS \(XLA's flag parser "
                                         r"refused it, saying no more\)"):
        xla_flags.check_probed(environ)


def test_a_jax_whose_import_fails_is_said_as_such_not_blamed_on_the_flags(tmp_path):
    environ = {**broken_jax(tmp_path), "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    with pytest.raises(UsageError, match=rf"could not import jax \(RuntimeError: {JAXLIB_MISMATCH}\)") as caught:
        xla_flags.check(environ)
    assert "XLA_FLAGS" not in str(caught.value)


def test_flags_xla_takes_pass_and_none_is_no_probe():
    xla_flags.check({**os.environ, "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_gpu_autotune_level=0"})
    xla_flags.check({"XLA_FLAGS": "  "})  # nothing set: nothing started (no PATH, no PYTHONPATH needed)
