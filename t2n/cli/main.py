"""The ``t2n`` command: a click group whose subcommands live in their own modules and
are imported only when called, so ``t2n --help`` and ``t2n inspect`` never load torch.

Exit status: 0 when the command did what was asked, 1 when it failed (an export error,
an outputs mismatch, an unreadable artifact: the typed error's message is printed, with
the traceback only under ``--debug``), 2 for a usage error (an unknown option, a
malformed value), as click reports it.

More subcommands register with :func:`register_subcommand` (or by adding a line to
:data:`SUBCOMMANDS`): a name, the ``module:attribute`` of a ``click.Command`` and a
one-line help text shown by ``t2n --help`` without importing the module.
"""

from __future__ import annotations

import functools
import importlib
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import attrs
import click

from t2n.errors import InvalidArgumentError, OverwriteRefusedError, T2NError


@attrs.frozen
class Subcommand:
    """Where a subcommand lives: ``target`` is ``"package.module:attribute"``, a
    ``click.Command`` imported the first time the subcommand is called."""

    target: str
    short_help: str


SUBCOMMANDS: dict[str, Subcommand] = {
    "export": Subcommand("t2n.cli.export:export_command",
                         "Export a model (a Python factory or a TorchScript file) to NNEF."),
    "inspect": Subcommand("t2n.cli.inspect:inspect_command",
                          "Describe an artifact: inputs, outputs, symbols, ops, tensors."),
    "check": Subcommand("t2n.cli.check:check_command",
                        "Run an artifact in tract or the Khronos interpreter; compare outputs."),
    "remodel": Subcommand("t2n.cli.remodel:remodel_command",
                          "Reshape an artifact's interface with a remodel plan (YAML/JSON)."),
    "tensors": Subcommand("t2n.cli.tensors:tensors_command",
                          "Write the tensors of a checkpoint file as NNEF .dat files."),
    "llm": Subcommand("t2n.cli.llm:llm_command",
                      "Export a transformers LLM folder (causal, multimodal, encoder-decoder) to tract."),
    "generate": Subcommand("t2n.cli.generate:generate_command",
                           "Generate greedily in tract with a t2n llm export and its saved tokenizer."),
    "peft": Subcommand("t2n.cli.llm:peft_command",
                       "Write a LoRA/DoRA adapter's tensors as NNEF .dat files (.nnef.tgz)."),
    "nemo-asr": Subcommand("t2n.cli.nemo:nemo_asr_command",
                           "Export a NeMo speech recognizer (.nemo or config) as artifacts + manifest."),
    "nemo-transcribe": Subcommand("t2n.cli.nemo:nemo_transcribe_command",
                                  "Transcribe audio greedily with a nemo-asr export, in tract."),
    "nemo-classifier": Subcommand("t2n.cli.nemo:nemo_classifier_command",
                                  "Export a NeMo classifier (speech commands, frame VAD) as artifacts + manifest."),
    "nemo-classify": Subcommand("t2n.cli.nemo:nemo_classify_command",
                                "Classify audio (NeMo's labels and probabilities) with a nemo-classifier export."),
}
"""The subcommands of ``t2n``, by name."""


def register_subcommand(name: str, target: str, short_help: str, *, replace: bool = False) -> None:
    """Add a subcommand to ``t2n`` (imported lazily from ``target``, ``"module:attr"``).

    A name already taken raises ``InvalidArgumentError`` unless ``replace=True``."""
    if name in SUBCOMMANDS and not replace:
        raise InvalidArgumentError(
            f"the t2n subcommand {name!r} already exists ({SUBCOMMANDS[name].target}); "
            "pass replace=True to replace it")
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise InvalidArgumentError(f"subcommand target must be 'module:attribute', got {target!r}")
    SUBCOMMANDS[name] = Subcommand(target, short_help)


class LazyGroup(click.Group):
    """A group that lists :data:`SUBCOMMANDS` and imports each one only when it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*SUBCOMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in SUBCOMMANDS:
            return found
        module_name, _, attr = SUBCOMMANDS[cmd_name].target.partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{SUBCOMMANDS[cmd_name].target} is not a click.Command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List subcommands with their registered help, without importing them."""
        rows = [(name, SUBCOMMANDS[name].short_help) for name in sorted(SUBCOMMANDS)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_F = TypeVar("_F", bound=Callable[..., Any])


def debug_option(fn: _F) -> _F:
    """``--debug``: show the traceback of a failure (also ``t2n --debug COMMAND``)."""
    return click.option("--debug", is_flag=True, default=False,
                        help="On failure, print the full traceback too.")(fn)


def fail(message: str) -> NoReturn:
    """End the command with exit status 1 and ``message`` on stderr."""
    raise Failure(message)


class Failure(click.ClickException):
    """The command could not do what was asked (exit status 1)."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def guarded(fn: _F) -> _F:
    """Run a subcommand body: t2n's typed errors and other failures become exit status 1
    with their message (and the traceback under ``--debug``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, debug: bool = False, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = debug or bool((ctx.find_root().obj or {}).get("debug"))
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:  # every failure is reported, typed or not
            if debug:
                traceback.print_exception(exc)
            raise Failure(describe_failure(exc, debug, command=ctx.command)) from exc

    return wrapper  # type: ignore[return-value]


def describe_failure(exc: BaseException, debug: bool, command: click.Command | None = None) -> str:
    """The message printed for a failure: t2n's own errors by their class name and
    message; anything else also says how to see where it came from. Advice naming the
    API's ``overwrite=True`` names the command's ``--overwrite`` when it has one."""
    text = str(exc) or repr(exc)
    if isinstance(exc, OverwriteRefusedError) and command is not None and any(
            "--overwrite" in getattr(p, "opts", ()) for p in command.params):
        text = text.replace("overwrite=True", "--overwrite")
    if isinstance(exc, T2NError):
        return f"{type(exc).__name__}: {text}"
    hint = "" if debug else "\n(run again with --debug for the traceback)"
    return f"{type(exc).__name__}: {text}{hint}"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, default=False, help="On failure, print the full traceback too.")
@click.version_option(package_name="t2n", prog_name="t2n")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """t2n: export PyTorch models to NNEF for tract and Khronos NNEF, and inspect and
    check the artifacts.

    Exit status: 0 success, 1 the command failed (export error, mismatch, unreadable
    artifact), 2 usage error. Run `t2n COMMAND --help` for each command.
    """
    ctx.obj = {"debug": debug}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``t2n`` console script; returns the exit status."""
    try:
        status = cli.main(args=list(argv) if argv is not None else None, prog_name="t2n",
                          standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    return status if isinstance(status, int) else 0
