"""``t2n llm`` as users run it (``t2n.cli.main``, what the console script calls)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cli.cli_support import make_runner

from t2n.llm import tract_greedy_generate

from .folders import save_checkpoint
from .tiny_models import reference_tokens, tiny_model


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tiny_model("llama"), tmp_path_factory.mktemp("llama"))


def test_cli_exports_a_folder(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = make_runner()("llm", "--local-dir", str(checkpoint), "--export-dirpath", str(out),
                         "--dump-with-tokenizer-and-conf", "--num-logits-to-keep", "1",
                         "--naming-scheme", "numeric")
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / 'model' / 'model.nnef.tgz'}" in done.stdout
    assert (out / "tokenizer" / "tokenizer.json").is_file() and (out / "modes.json").is_file()
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(out, prompt, 16) == reference_tokens(tiny_model("llama"), prompt, 16)


def test_cli_refuses_a_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = make_runner()("llm", "--local-dir", str(tmp_path / "empty"), "--export-dirpath", str(tmp_path / "out"),
                         "-nv")
    assert done.returncode == 1
    assert "CheckpointFolderError" in done.stderr and "config.json" in done.stderr
    assert not (tmp_path / "out").exists()


def test_cli_help_documents_flags() -> None:
    done = make_runner()("llm", "--help")
    assert done.returncode == 0
    for flag in ("--local-dir", "--export-dirpath", "--force-module-dtype", "--compression-method",
                 "--force-f32-attention", "--force-f32-linear-accumulator", "--force-f32-normalization",
                 "--num-logits-to-keep", "--tract-check-io-tolerance", "--no-verify",
                 "--dump-with-tokenizer-and-conf", "--trust-remote-code", "--naming-scheme", "--reify-sdpa-operator"):
        assert flag in done.stdout
