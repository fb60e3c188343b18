import io
import logging

from t2n.serialize.progress import Progress, format_bytes


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_silent_when_not_a_terminal_but_logged(caplog):
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="t2n"), Progress(1 << 30, "writing w", stream=out) as p:
        for chunk in p.track([b"x" * 1000] * 3):
            assert len(chunk) == 1000
    assert out.getvalue() == ""
    assert p.done == 3000
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "writing w: 1.00 GiB"
    assert messages[-1].startswith("writing w: 2.93 KiB in ")


def test_bar_on_a_terminal_then_erased():
    term = FakeTerminal()
    p = Progress(100 << 20, "writing w", stream=term)
    assert p.bar
    p.update(50 << 20)
    p.update(50 << 20)
    p.close()
    text = term.getvalue()
    assert "|###############---------------|" in text or "50%" in text
    assert "100%" in text
    assert text.endswith("\r")  # the line is cleared at the end


def test_small_writes_draw_no_bar_unless_asked():
    term = FakeTerminal()
    assert not Progress(1000, stream=term).bar
    assert Progress(1000, stream=term, bar=True).bar
    assert not Progress(1 << 40, stream=term, bar=False).bar


def test_periodic_log_records(caplog, monkeypatch):
    clock = iter([0.0, 5.0, 11.0, 12.0, 30.0])
    monkeypatch.setattr("t2n.serialize.progress.time.perf_counter", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="t2n"):
        p = Progress(400, "w", stream=io.StringIO(), log_every=10.0)
        p.update(100)  # t=5: too early
        p.update(100)  # t=11: logged
        p.update(100)  # t=12: too early again
        p.close()      # t=30
    messages = [r.getMessage() for r in caplog.records]
    assert messages[1].startswith("w:  50% 200 B/400 B")
    assert len(messages) == 3


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 << 20) == "3.00 MiB"
    assert format_bytes(5 << 30) == "5.00 GiB"


def test_a_total_known_later_brings_the_bar_when_large():
    """export() learns its total after the compile: a bar then appears on a terminal
    (not when told bar=False, nor when not a terminal)."""
    term = FakeTerminal()
    p = Progress(0, stream=term)
    assert not p.bar
    p.set_total(100 << 20)
    assert p.bar
    q = Progress(0, stream=term, bar=False)
    q.set_total(100 << 20)
    assert not q.bar
    r = Progress(0, stream=io.StringIO())
    r.set_total(100 << 20)
    assert not r.bar
