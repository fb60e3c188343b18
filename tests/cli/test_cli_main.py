"""The ``t2n`` group: help, exit status of usage errors, lazy imports, registration."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from t2n.cli import SUBCOMMANDS, register_subcommand
from t2n.errors import InvalidArgumentError

from .cli_support import Run, make_runner

COMMANDS = ("export", "inspect", "check", "tensors")


def test_group_help_lists_every_subcommand(t2n_cli: Run) -> None:
    res = t2n_cli("--help")
    assert res.returncode == 0, res.stderr
    for name in COMMANDS:
        assert name in res.stdout
    assert "Exit status: 0 success, 1" in res.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_each_subcommand_has_help(t2n_cli: Run, name: str) -> None:
    res = t2n_cli(name, "--help")
    assert res.returncode == 0, res.stderr
    assert f"Usage: t2n {name}" in res.stdout
    assert "--debug" in res.stdout


def test_version_from_the_console_script() -> None:
    res = make_runner(real_process=True)("--version")
    assert res.returncode == 0 and "t2n" in res.stdout


@pytest.mark.parametrize("args", [(), ("frobnicate",), ("inspect",), ("export", "--no-such-option", "x")])
def test_usage_errors_exit_2(t2n_cli: Run, args: tuple[str, ...]) -> None:
    res = t2n_cli(*args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr


def test_python_dash_m_runs_the_same_command() -> None:
    res = subprocess.run([sys.executable, "-m", "t2n.cli", "--help"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0 and "inspect" in res.stdout


def test_help_and_light_subcommands_do_not_import_torch() -> None:
    """``--help``, ``inspect`` and ``check`` start fast: torch is imported only to export."""
    code = textwrap.dedent("""
        import sys
        from t2n.cli import main
        from t2n.cli.main import cli
        import t2n.cli.inspect, t2n.cli.check, t2n.cli.tensors, t2n.cli.export
        try:
            main(["--help"])
        except SystemExit as e:
            assert e.code == 0, e.code
        assert "torch" not in sys.modules, "torch was imported"
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr


def test_registered_subcommand_runs_lazily(t2n_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "hello_cmd.py").write_text(textwrap.dedent("""
        import click

        @click.command("hello")
        @click.argument("who")
        def hello(who):
            click.echo(f"hello {who}")
    """))
    code = textwrap.dedent("""
        import sys
        from t2n.cli import main, register_subcommand
        register_subcommand("hello", "hello_cmd:hello", "Say hello.")
        assert "hello_cmd" not in sys.modules
        main(sys.argv[1:])
    """)
    res = subprocess.run([sys.executable, "-c", code, "hello", "world"], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[2]}"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "hello world"


def test_register_subcommand_refuses_clashes_and_bad_targets() -> None:
    before = dict(SUBCOMMANDS)
    with pytest.raises(InvalidArgumentError, match="'inspect' already exists.*replace=True"):
        register_subcommand("inspect", "x:y", "no")
    with pytest.raises(InvalidArgumentError, match="'module:attribute'.*'nocolon'"):
        register_subcommand("new", "nocolon", "no")
    assert before == SUBCOMMANDS
