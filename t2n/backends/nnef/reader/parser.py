"""A parser for NNEF documents as t2n, tract and Khronos tools write them.

It reads the version line, ``extension`` lines (kept as text), fragment definitions and
declarations (kept with their source text, bodies parsed), the graph, and the
expressions of NNEF 1.0.5 that graph bodies use: literals, identifiers (and tract's
``i"any text"`` form), arrays, tuples, invocations with generic types and keyword
arguments, binary and unary operators, and subscripts. ``graph.quant`` files
(``"name": invocation;`` lines) are read with the same tokens. Anything else (``if``
expressions, comprehensions) is a :class:`NNEFSyntaxError` naming the line.
"""

from __future__ import annotations

import re

import attrs

from t2n.backends.nnef.reader.tree import (
    BINARY_PRECEDENCE,
    Array,
    Assignment,
    Call,
    Document,
    Expr,
    Fragment,
    Graph,
    Ident,
    Index,
    Literal,
    Param,
    Slot,
    Tuple,
    Unary,
)
from t2n.backends.nnef.reader.tree import Binary as BinaryExpr
from t2n.errors import NNEFSyntaxError

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<xident>i"(?:[^"\\]|\\.)*")
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<slot>\$\d+)
  | (?P<punct>->|<=|>=|==|!=|&&|\|\||[()\[\]{}<>,;:=+\-*/^!?.])
""", re.X)


@attrs.frozen
class Token:
    kind: str
    text: str
    start: int
    end: int


def tokenize(text: str, source: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise NNEFSyntaxError(f"{source}:{_line(text, pos)}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "space":
            tokens.append(Token(kind, m.group(), m.start(), m.end()))
        pos = m.end()
    tokens.append(Token("end", "", len(text), len(text)))
    return tokens


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _unquote(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.tokens = tokenize(text, source)
        self.pos = 0

    # -- tokens ---------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.peek()
        self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok.text == text and tok.kind in ("punct", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def fail(self, what: str, tok: Token | None = None) -> NNEFSyntaxError:
        tok = tok or self.peek()
        found = repr(tok.text) if tok.kind != "end" else "the end of the text"
        return NNEFSyntaxError(f"{self.source}:{_line(self.text, tok.start)}: expected {what}, found {found}")

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.fail(repr(text))
        return self.take()

    def name(self) -> str:
        tok = self.take()
        if tok.kind == "ident":
            return tok.text
        if tok.kind == "xident":
            return _unquote(tok.text[1:])
        raise self.fail("a name", tok)

    # -- document -------------------------------------------------------------------
    def document(self) -> Document:
        self.expect("version")
        version = self.take()
        if version.kind != "number":
            raise self.fail("a version number", version)
        self.expect(";")
        extensions: list[str] = []
        fragments: list[Fragment] = []
        while self.at("extension"):
            extensions.append(self.extension())
        while self.at("fragment"):
            fragments.append(self.fragment())
        if not self.at("graph"):
            raise self.fail("'extension', 'fragment' or 'graph'")
        graph = self.graph()
        if self.peek().kind != "end":
            raise self.fail("the end of the document after the graph")
        return Document(version.text, tuple(extensions), tuple(fragments), graph)

    def extension(self) -> str:
        start = self.expect("extension").end
        while not self.at(";"):
            if self.peek().kind == "end":
                raise self.fail("';' ending the extension line")
            self.take()
        end = self.take().start
        return " ".join(self.text[start:end].split())

    def fragment(self) -> Fragment:
        start = self.expect("fragment").start
        name = self.name()
        generic = self.generic_decl()
        self.expect("(")
        params = self.params()
        self.expect("->")
        self.expect("(")
        results = self.params()
        body: tuple[Assignment, ...] | None = None
        if self.accept(";"):
            end = self.tokens[self.pos - 1].end
        else:
            body = self.block()
            end = self.tokens[self.pos - 1].end
        return Fragment(name, params, results, body, self.text[start:end], generic)

    def generic_decl(self) -> str | None:
        if not self.accept("<"):
            return None
        self.expect("?")
        default = None
        if self.accept("="):
            default = self.type_text()
        self.expect(">")
        return "?" if default is None else f"? = {default}"

    def params(self) -> tuple[Param, ...]:
        out: list[Param] = []
        while not self.accept(")"):
            if out:
                self.expect(",")
            name = self.name()
            self.expect(":")
            type_ = self.type_text()
            default = self.expression() if self.accept("=") else None
            out.append(Param(name, type_, default))
        return tuple(out)

    def type_text(self) -> str:
        """A type as text: ``tensor<scalar>``, ``integer[]``, ``(string, tensor<?>)[]``."""
        if self.accept("("):
            parts = [self.type_text()]
            while self.accept(","):
                parts.append(self.type_text())
            self.expect(")")
            text = "(" + ", ".join(parts) + ")"
        else:
            text = self.name() if not self.at("?") else self.take().text
            if self.accept("<"):
                inner = self.take().text if self.at("?") else self.name()
                self.expect(">")
                text += f"<{inner}>"
        while self.at("[") and self.peek(1).text == "]":
            self.pos += 2
            text += "[]"
        return text

    def graph(self) -> Graph:
        self.expect("graph")
        name = self.name()
        inputs = self.name_list("(", ")")
        self.expect("->")
        outputs = self.name_list("(", ")")
        return Graph(name, inputs, outputs, self.block())

    def name_list(self, open_: str, close: str) -> tuple[str, ...]:
        self.expect(open_)
        names: list[str] = []
        while not self.accept(close):
            if names:
                self.expect(",")
            names.append(self.name())
        return tuple(names)

    def block(self) -> tuple[Assignment, ...]:
        self.expect("{")
        body: list[Assignment] = []
        while not self.accept("}"):
            body.append(self.assignment())
        return tuple(body)

    def assignment(self) -> Assignment:
        if self.at("("):
            targets, form = self.name_list("(", ")"), "tuple"
        elif self.at("["):
            targets, form = self.name_list("[", "]"), "array"
        else:
            targets, form = (self.name(),), "one"
        self.expect("=")
        rhs = self.expression()
        self.expect(";")
        return Assignment(targets, rhs, form)

    # -- expressions ----------------------------------------------------------------
    def expression(self, min_prec: int = 1) -> Expr:
        if self.at("if") or self.at("for"):
            raise self.fail("an expression (if/else and comprehensions are not read)")
        left = self.unary()
        while True:
            op = self.peek()
            prec = BINARY_PRECEDENCE.get(op.text) if op.kind == "punct" else None
            if prec is None or prec < min_prec:
                return left
            self.pos += 1
            right = self.expression(prec if op.text == "^" else prec + 1)
            left = BinaryExpr(op.text, left, right)

    def unary(self) -> Expr:
        if self.at("-") or self.at("+") or self.at("!"):
            op = self.take().text
            operand = self.unary()
            if op == "-" and isinstance(operand, Literal) and isinstance(operand.value, (int, float)) \
                    and not isinstance(operand.value, bool):
                return Literal(-operand.value)
            if op == "+" and isinstance(operand, Literal):
                return operand
            return Unary(op, operand)
        return self.postfix(self.primary())

    def postfix(self, e: Expr) -> Expr:
        while self.at("["):
            self.take()
            index = self.expression()
            self.expect("]")
            e = Index(e, index)
        return e

    def primary(self) -> Expr:
        tok = self.peek()
        if tok.kind == "number":
            self.pos += 1
            text = tok.text
            return Literal(float(text) if any(c in text for c in ".eE") else int(text))
        if tok.kind == "string":
            self.pos += 1
            return Literal(_unquote(tok.text))
        if tok.kind == "slot":
            self.pos += 1
            return Slot(int(tok.text[1:]))
        if tok.text == "[" and tok.kind == "punct":
            self.pos += 1
            return Array(self.items("]"))
        if tok.text == "(" and tok.kind == "punct":
            self.pos += 1
            items = self.items(")")
            return items[0] if len(items) == 1 and self.tokens[self.pos - 2].text != "," else Tuple(items)
        if tok.kind in ("ident", "xident"):
            if tok.kind == "ident" and tok.text in ("true", "false"):
                self.pos += 1
                return Literal(tok.text == "true")
            if tok.kind == "ident" and tok.text == "inf":
                self.pos += 1
                return Literal(float("inf"))
            name = self.name()
            generic = self.call_generic()
            if generic is not None or self.at("("):
                return self.call(name, generic)
            return Ident(name)
        raise self.fail("an expression")

    def call_generic(self) -> str | None:
        """``<scalar>`` / ``<?>`` after a name, when an argument list follows."""
        if not self.at("<"):
            return None
        t1, t2, t3 = self.peek(1), self.peek(2), self.peek(3)
        if t1.kind in ("ident", "punct") and t2.text == ">" and t3.text == "(":
            self.pos += 3
            return t1.text
        return None

    def call(self, name: str, generic: str | None) -> Call:
        self.expect("(")
        args: list[Expr] = []
        kwargs: list[tuple[str, Expr]] = []
        while not self.accept(")"):
            if args or kwargs:
                self.expect(",")
            tok, nxt = self.peek(), self.peek(1)
            if tok.kind == "ident" and nxt.text == "=" and nxt.kind == "punct":
                self.pos += 2
                kwargs.append((tok.text, self.expression()))
            else:
                if kwargs:
                    raise self.fail("a keyword argument (positional ones come first)")
                args.append(self.expression())
        return Call(name, tuple(args), tuple(kwargs), generic)

    def items(self, close: str) -> tuple[Expr, ...]:
        out: list[Expr] = []
        while not self.accept(close):
            if out:
                self.expect(",")
            out.append(self.expression())
        return tuple(out)


def parse_document(text: str, source: str = "graph.nnef") -> Document:
    """The document in ``text``; ``source`` names it in errors."""
    return _Parser(text, source).document()


def parse_fragment(text: str, source: str = "<fragment>") -> Fragment:
    """One ``fragment`` definition (its text as :class:`~.tree.Fragment` keeps it)."""
    p = _Parser(text, source)
    frag = p.fragment()
    if p.peek().kind != "end":
        raise p.fail("the end of the fragment")
    return frag


def parse_expression(text: str, source: str = "<expression>") -> Expr:
    p = _Parser(text, source)
    e = p.expression()
    if p.peek().kind != "end":
        raise p.fail("the end of the expression")
    return e


def parse_quant(text: str, source: str = "graph.quant") -> dict[str, Call]:
    """``graph.quant``: tensor identifier → its quantization invocation."""
    p = _Parser(text, source)
    out: dict[str, Call] = {}
    while p.peek().kind != "end":
        tok = p.take()
        if tok.kind == "string":
            name = _unquote(tok.text)
        elif tok.kind in ("ident", "xident"):
            p.pos -= 1
            name = p.name()
        else:
            raise p.fail("a tensor name", tok)
        p.expect(":")
        call = p.expression()
        if not isinstance(call, Call):
            raise p.fail("an invocation such as zero_point_linear_quantize(...)")
        p.expect(";")
        out[name] = call
    return out
