"""The transformation graph: preprocessing, independent feature vectors, the model."""

import ast
from dataclasses import dataclass, field

from willump.graph.statements import Statement

PLACEHOLDER = "__willump_ifvs"  # the name the combine step reads the IFV values from


@dataclass
class IFV:
    """An independent feature vector and the generator that computes it."""

    index: int
    name: str  # the variable it produces
    expression: ast.expr  # its entry in the concatenation
    generator: list[Statement]  # statements only this IFV needs, in source order
    inputs: tuple[str, ...]  # function parameters it reads, directly or via preprocessing
    columns: tuple[str, ...]  # columns of those parameters it reads
    origin: list[Statement] | None = None  # user statements it stands for, when rewritten
    description: str | None = None  # what the feature vector is, when rewritten

    @property
    def statements(self) -> list[str]:
        """Source of the generator's statements, then of the IFV's entry."""
        if self.origin is not None:
            return [s.source for s in self.origin]
        lines = [s.source for s in self.generator]
        expression = ast.unparse(self.expression)
        if not lines or expression != self.name:
            lines.append(expression)
        return lines

    def __repr__(self) -> str:
        return f"IFV({self.index}, {self.name!r}, inputs={list(self.inputs)}, columns={list(self.columns)})"


@dataclass
class Combiner:
    """The commutative node joining the IFVs (or the model input itself)."""

    kind: str  # e.g. "scipy.sparse.hstack"; "identity" when there is no concatenation
    statement: Statement  # the statement that holds the IFV entries
    entries: str = ""  # source of the IFV entries, as written


@dataclass
class ModelNode:
    """The sink: the call to the model."""

    statement: Statement
    method: str
    model: ast.expr  # the expression of the model object
    call: ast.Call


@dataclass
class TransformationGraph:
    """What willump understood of a function, printed as readable text."""

    name: str
    parameters: tuple[str, ...]
    statements: list[Statement]
    preprocessing: list[Statement] = field(default_factory=list)
    ifvs: list[IFV] = field(default_factory=list)
    combiner: Combiner | None = None
    model: ModelNode | None = None
    tail: list[Statement] = field(default_factory=list)  # the combine step and what follows it
    notes: list[str] = field(default_factory=list)  # lines that run as plain Python, and why
    guards: list[Statement] = field(default_factory=list)  # leading 'if <test>: return/raise', run first
    unmodified_reason: str | None = None  # set when the whole function runs unmodified
    unmodified_hint: str | None = None  # how to write the function so that it does not

    @property
    def guard_lines(self) -> list[str]:
        """``line N: if <test>:`` per guard: they run first, and end the call as written when they fire."""
        return [f"line {guard.lineno}: {_first_line(guard)}" for guard in self.guards]

    def refusal(self, action: str) -> str:
        """Why ``action`` (fit, top_k) cannot work on a function that runs unmodified, and what to write instead."""
        return (
            f"{action} needs the transformation graph of {self.name}, but it runs unmodified because of "
            f"{self.unmodified_reason}; to fix it, {self.unmodified_hint}"
        )

    @property
    def optimizable(self) -> bool:
        return self.unmodified_reason is None

    def __str__(self) -> str:
        out = [f"TransformationGraph of {self.name}({', '.join(self.parameters)})"]
        if not self.optimizable:
            out.append(f"  runs unmodified: {self.unmodified_reason}")
            return "\n".join(out)
        out += [f"guard: {guard} (when it fires, the call returns or raises as written)" for guard in self.guard_lines]
        out.append("preprocessing (runs once, before any feature generator):")
        out += _statement_lines(self.preprocessing) or ["    (none)"]
        for ifv in self.ifvs:
            reads = ", ".join(ifv.columns) if ifv.columns else ", ".join(ifv.inputs) or "nothing"
            out.append(f"IFV {ifv.index} {ifv.name!r} (reads {reads}):")
            if ifv.origin is not None:
                out += _statement_lines(ifv.origin)
                out.append(f"    feature vector: {ifv.description}")
            else:
                out += _statement_lines(ifv.generator)
                out.append(f"    feature vector: {ast.unparse(ifv.expression)}")
        combine = self.combiner.statement
        out.append(f"combine ({self.combiner.kind}), line {combine.lineno}:")
        out += _statement_lines([s for s in self.tail if s is not self.model.statement])
        out.append(f"model ({self.model.method} on {ast.unparse(self.model.model)}), line {self.model.statement.lineno}:")
        out += _statement_lines([self.model.statement])
        for note in self.notes:
            out.append(f"plain Python: {note}")
        return "\n".join(out)

    def __repr__(self) -> str:
        guards = "".join(f", guard: line {guard.lineno}" for guard in self.guards)
        return (
            f"<TransformationGraph {self.name}: {len(self.preprocessing)} preprocessing, "
            f"{len(self.ifvs)} IFVs, model {self.model.method if self.model else None}{guards}>"
        )


def _statement_lines(statements: list[Statement]) -> list[str]:
    lines = []
    for statement in statements:
        marker = "  [plain Python]" if statement.opaque else ""
        lines.append(f"    line {statement.lineno}: {_first_line(statement)}{marker}")
    return lines


def _first_line(statement: Statement) -> str:
    text = statement.source.splitlines()
    return text[0] + (" ..." if len(text) > 1 else "")
