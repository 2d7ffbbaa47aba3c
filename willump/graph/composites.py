"""scikit-learn's composites read as their steps.

``pipe.predict_proba(df)`` on a fitted ``Pipeline`` is one call, one opaque
node. Here it is rewritten, before the graph is built, into the statements
scikit-learn runs for it: each step's ``transform`` in its own statement, each
``FeatureUnion`` or ``ColumnTransformer`` branch on its own (after selecting
its columns), the branches joined by the composite's own join
(``compile.composites``), and the final estimator's method. A
``TransformedTargetRegressor``'s ``predict`` is its regressor's ``predict``
(itself read as its steps when it is a Pipeline), then the inverse of the target
transform (``compile.meta.target_inverse``); a ``VotingClassifier``'s or
``VotingRegressor``'s, each estimator's answer on its own (each read as its steps),
then the vote (``compile.meta.vote``); a ``StackingClassifier``'s or
``StackingRegressor``'s, each estimator's answer, their concatenation
(``compile.meta.stack``) and the final estimator's method; a ``CalibratedClassifierCV``'s,
each calibrated classifier's estimator's response, then scikit-learn's calibration of them
(``compile.meta.calibrate``); a ``FrozenEstimator``'s, its estimator's. The branches of
the join closest to the model become IFVs, the vectorizers and models compiled
kernels, as if the steps had been written out by hand.

The rewritten code reads the fitted objects as they were at decoration, under
names of its own (``Expansion.names``). Before every call ``Expansion.current``
checks that the composites still hold the same steps with the same output
settings; when they do not (a step replaced, the transformer refitted), the
call runs the original function.
"""

import ast
import copy
import operator
import re
from dataclasses import dataclass, field

from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.compose._column_transformer import _is_empty_column_selection
from sklearn.ensemble import StackingClassifier, StackingRegressor, VotingClassifier, VotingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.utils.validation import check_is_fitted

from willump.compile.composites import COLUMN_INPUT, COLUMN_STACK, COLUMNS, HELPERS, UNION_STACK
from willump.compile.meta import (
    CALIBRATE, READ_AS_STEPS, STACK, STACKED_LABELS, TARGET_INVERSE, VOTE, calibrate, calibrated_method, stack,
    stacked_labels, target_inverse, vote, voted_method,
)
from willump.compile.preprocessing import output_config
from willump.graph.recognize import MODEL_METHODS
from willump.graph.statements import replace_node, walk_scope

PREFIX = "__willump_sk"  # the names the rewritten code reads the fitted objects and values under


@dataclass
class Expansion:
    """The body with the composites' calls written out, and what that code reads."""

    body: list
    names: dict = field(default_factory=dict)  # name the rewritten code reads -> object
    display: dict = field(default_factory=dict)  # such a name -> how explanations show it
    notes: list = field(default_factory=list)  # composites left as one call, and why
    lines: list = field(default_factory=list)  # the lines of the calls written out
    ensembles: dict = field(default_factory=dict)  # line -> the vote or calibrated classifier written out there
    unfitted: list = field(default_factory=list)  # (composite, its attributes' count) not fitted at decoration
    _receivers: list = field(default_factory=list)  # (function, name, the composite the name held)
    _lists: list = field(default_factory=list)  # (owner, attribute, its items at decoration)
    _held: list = field(default_factory=list)  # (owner, attribute, the object it held at decoration)
    _joins: list = field(default_factory=list)  # (FeatureUnion or ColumnTransformer written out, its output)

    def current(self) -> bool:
        """Do the names still hold the composites, and these the steps the rewritten code calls,
        with the same output?"""
        for function, name, composite in self._receivers:
            if _value_of(function, name) is not composite:
                return False
        for owner, attribute, items in self._lists:
            now = getattr(owner, attribute, None)
            if type(now) is not list or len(now) != len(items) or not all(map(operator.is_, now, items)):
                return False
        for owner, attribute, held in self._held:
            if getattr(owner, attribute, None) is not held:
                return False
        return all(output_config(join) == output for join, output in self._joins)

    def fitted_since(self) -> bool:
        """Has a composite that was not fitted at decoration been fitted since (fit adds attributes)?"""
        return any(len(vars(_final(composite))) != count for composite, count in self.unfitted)

    def readable(self, text: str) -> str:
        """``text`` (code the rewritten body holds) with its names as the user knows the objects."""
        if not self.display:
            return text
        return _NAME.sub(lambda m: self.display.get(m.group(0), m.group(0)), text)


def _value_of(function, name: str):
    """What ``name`` (a global or closure variable of ``function``) holds now."""
    code = function.__code__
    if name in code.co_freevars:
        try:
            return function.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:  # an empty cell
            return None
    return function.__globals__.get(name)


_NAME = re.compile(r"__willump_\w+")
# How explanations show the joins and selections the rewritten code calls.
_HELPER_DISPLAY = {
    UNION_STACK: "union_stack", COLUMN_INPUT: "check_input", COLUMNS: "select_columns", COLUMN_STACK: "column_stack",
    TARGET_INVERSE: "target_inverse", VOTE: "vote", STACK: "stack", STACKED_LABELS: "stacked_labels",
    CALIBRATE: "calibrate",
}
_HELPERS = {
    **HELPERS, TARGET_INVERSE: target_inverse, VOTE: vote, STACK: stack, STACKED_LABELS: stacked_labels,
    CALIBRATE: calibrate,
}
_VOTERS = (VotingClassifier, VotingRegressor)
_STACKS = (StackingClassifier, StackingRegressor)
_ENSEMBLE_WRITERS = {  # the _Writer method writing out the ensemble's answer
    VotingClassifier: "vote", VotingRegressor: "vote", StackingClassifier: "stack", StackingRegressor: "stack",
    CalibratedClassifierCV: "calibrate",
}
try:
    from sklearn.frozen import FrozenEstimator as _FROZEN  # (scikit-learn >= 1.6)
except ImportError:
    _FROZEN = None
_NOT_WORD = re.compile(r"\W+")


def expand(body: list, resolver) -> Expansion:
    """``body`` with every call of a fitted composite's predict, predict_proba, decision_function,
    score_samples or transform written out as its steps, where the steps run as they would inside it."""
    expansion = Expansion([])
    writer = _Writer(expansion)
    for statement in body:
        expansion.body += writer.statement(statement, resolver)
    if expansion.names:
        expansion.names.update({name: _HELPERS[name] for name in writer.helpers})
        expansion.display.update({name: _HELPER_DISPLAY[name] for name in writer.helpers})
    return expansion


class _Writer:
    def __init__(self, expansion: Expansion):
        self.expansion = expansion
        self.count = 0
        self.helpers = set()

    def statement(self, statement: ast.stmt, resolver) -> list:
        """``statement``, after the statements its first composite call is written out into."""
        if _composite_call(statement, resolver) is None:
            return [statement]
        statement = copy.deepcopy(statement)  # (the user's definition stays as it is)
        call, composite, name = _composite_call(statement, resolver)
        reason = _not_written_out(composite, call.func.attr)
        if reason == _UNFITTED:
            self.expansion.unfitted.append((composite, len(vars(_final(composite)))))
        if reason:
            self.expansion.notes.append(
                f"line {call.lineno}: {name}.{call.func.attr}(...) runs as one call ({reason}), "
                "a single feature vector"
            )
            return [statement]
        self.location = statement
        self.expansion._receivers.append((resolver.func, name, composite))
        before = []
        if call.func.attr == "transform":
            result = self.transform(composite, call.args[0], name, before)
        else:
            result = self.predicted(composite, call, call.args[0], name, before)
        self.expansion.lines.append(call.lineno)
        rewritten = replace_node(statement, call, result)
        if any(_calls_helper(result, helper) for helper in (TARGET_INVERSE, VOTE, STACKED_LABELS, CALIBRATE)):
            ast.copy_location(result, statement)  # (replace_node put it where the model call is)
        if _aliases(rewritten, before[-1] if before else None):  # X = step: the last step binds X itself
            before[-1].targets = rewritten.targets
            return [self.located(s) for s in before]
        return [self.located(s) for s in before] + self.statement(rewritten, resolver)

    def predicted(self, estimator, call: ast.Call, value: ast.expr, path: str, before: list) -> ast.expr:
        """The expression computing ``estimator.<call's method>(value)`` as the estimator computes
        it: a Pipeline's steps then its final estimator's method, a TransformedTargetRegressor's
        regressor then ``target_inverse``, a vote, stack or calibrated classifier by its writer
        (``_ENSEMBLE_WRITERS``), a FrozenEstimator as its estimator, else the estimator's own
        method. (Each node where the one it stands for was: the graph finds the model's input by
        position.)"""
        kind = type(estimator)
        writer = _ENSEMBLE_WRITERS.get(kind)
        if writer is not None and not _not_written_out(estimator, call.func.attr):
            return getattr(self, writer)(estimator, call, value, path, before)
        if kind is _FROZEN:  # (its methods are its estimator's: __getattr__)
            self.expansion._held.append((estimator, "estimator", estimator.estimator))
            return self.predicted(estimator.estimator, call, value, f"{path}.estimator", before)
        if kind is TransformedTargetRegressor and not _not_written_out(estimator, call.func.attr):
            self.expansion._held.append((estimator, "regressor_", estimator.regressor_))
            inner = self.predicted(estimator.regressor_, call, value, f"{path}.regressor_", before)
            # (at the statement's position: the model call keeps the one of the call written out)
            return ast.copy_location(self.helper(TARGET_INVERSE, [self.bind(estimator, path), inner]), self.location)
        if kind is Pipeline and not _not_written_out(estimator, call.func.attr):
            self.expansion._lists.append((estimator, "steps", list(estimator.steps)))
            features = self.steps(estimator.steps[:-1], value, path, before)
            final_name, final = estimator.steps[-1]
            return self.predicted(final, call, features, f"{path}[{final_name!r}]", before)
        model = ast.copy_location(self.bind(estimator, path), call.func.value)
        method = ast.copy_location(ast.Attribute(model, call.func.attr, ast.Load()), call.func)
        return ast.Call(method, [ast.copy_location(copy.copy(value), call.args[0])], [])

    def vote(self, voting, call: ast.Call, value: ast.expr, path: str, before: list) -> ast.Call:
        """Each estimator's answer in its own statements, then ``vote`` of them."""
        self.expansion.ensembles[self.location.lineno] = type(voting).__name__
        if type(voting) is VotingClassifier:  # (soft or hard: which method it collects)
            self.expansion._held.append((voting, "voting", voting.voting))
        value = self.once(value, path, before)
        method = voted_method(voting, call.func.attr)
        asked = [(estimator_path, estimator, method) for estimator_path, estimator in _named_estimators(voting, path)]
        answers = self.answers(voting, "estimators_", asked, call, value, before)
        arguments = [self.bind(voting, path), ast.Constant(call.func.attr), ast.List(answers, ast.Load())]
        return ast.copy_location(self.helper(VOTE, arguments), self.location)

    def stack(self, stacking, call: ast.Call, value: ast.expr, path: str, before: list) -> ast.expr:
        """Each estimator's answer in its own statements, their concatenation (``stack``), then the
        final estimator's method (for a classifier's ``predict``, its labels by ``stacked_labels``)."""
        self.expansion._held.append((stacking, "final_estimator_", stacking.final_estimator_))
        value = self.once(value, path, before)
        asked = [(estimator_path, estimator, method) for (estimator_path, estimator), method
                 in zip(_named_estimators(stacking, path), stacking.stack_method_)]
        answers = self.answers(stacking, "estimators_", asked, call, value, before)
        stacked = self.assign(
            self.helper(STACK, [self.bind(stacking, path), ast.List(answers, ast.Load()), copy.copy(value)]),
            path, before, "stacked")
        final = self.predicted(stacking.final_estimator_, call, stacked, f"{path}.final_estimator_", before)
        if type(stacking) is StackingClassifier and call.func.attr == "predict":
            return ast.copy_location(self.helper(STACKED_LABELS, [self.bind(stacking, path), final]), self.location)
        return final

    def calibrate(self, calibrated, call: ast.Call, value: ast.expr, path: str, before: list) -> ast.Call:
        """Each calibrated classifier's estimator's response in its own statements, then ``calibrate``."""
        self.expansion.ensembles[self.location.lineno] = type(calibrated).__name__
        value = self.once(value, path, before)
        asked = [(f"{path}.calibrated_classifiers_[{position}].estimator", fold.estimator, calibrated_method(fold.estimator))
                 for position, fold in enumerate(calibrated.calibrated_classifiers_)]
        responses = self.answers(calibrated, "calibrated_classifiers_", asked, call, value, before)
        arguments = [self.bind(calibrated, path), ast.Constant(call.func.attr), ast.List(responses, ast.Load()),
                     copy.copy(value)]
        return ast.copy_location(self.helper(CALIBRATE, arguments), self.location)

    def answers(self, ensemble, attribute: str, asked: list, call: ast.Call, value: ast.expr, before: list) -> list:
        """The names holding the answers for ``value`` (a name, or read again alike: ``once``) of the fitted
        estimators the ensemble's list ``attribute`` holds: ``asked`` (path, estimator, method) each."""
        self.expansion._lists.append((ensemble, attribute, list(getattr(ensemble, attribute))))
        answers = []
        for estimator_path, estimator, method in asked:
            asking = copy.copy(call)
            asking.func = copy.copy(call.func)
            asking.func.attr = method
            answers.append(self.assign(self.predicted(estimator, asking, value, estimator_path, before), estimator_path, before))
        return answers

    def once(self, value: ast.expr, path: str, before: list) -> ast.expr:
        """``value``, or a name bound to it first when reading it again could give another value or run code."""
        return value if _reads_again_alike(value) else self.assign(value, path, before, "input")

    def steps(self, steps, value: ast.expr, path: str, before: list) -> ast.expr:
        for step_name, step in steps:
            if step is None or (isinstance(step, str) and step == "passthrough"):
                continue
            value = self.transform(step, value, f"{path}[{step_name!r}]", before)
        return value

    def transform(self, step, value: ast.expr, path: str, before: list) -> ast.expr:
        """The statements computing ``step.transform(value)`` as the step computes it, appended to
        ``before``; returns the name holding the result."""
        kind = type(step)
        reason = _not_written_out(step, "transform") if "transform" in READ_AS_STEPS.get(kind, ()) else None
        if kind is Pipeline and not reason:
            self.expansion._lists.append((step, "steps", list(step.steps)))
            return self.steps(step.steps, value, path, before)
        if kind in (FeatureUnion, ColumnTransformer) and not reason:
            return self.join(step, value, path, before)
        if reason:
            self.expansion.notes.append(f"line {self.location.lineno}: {path}.transform(...) runs as one call ({reason})")
        call = ast.Call(ast.Attribute(self.bind(step, path), "transform", ast.Load()), [value], [])
        return self.assign(call, path, before)

    def join(self, composite, value: ast.expr, path: str, before: list) -> ast.expr:
        """A FeatureUnion's or ColumnTransformer's branches, each on its own, then their join."""
        union = type(composite) is FeatureUnion
        owner = self.bind(composite, path)
        if union:
            self.expansion._lists.append((composite, "transformer_list", list(composite.transformer_list)))
            source = self.once(value, path, before)
        else:
            self.expansion._lists.append((composite, "transformers_", list(composite.transformers_)))
            source = self.assign(self.helper(COLUMN_INPUT, [owner, value]), path, before, "input")
        blocks = []
        for position, (name, branch, selection) in _branches(composite):
            branch_path = f"{path}[{name!r}]" if union else f"{path}.named_transformers_[{name!r}]"
            if union:
                branch_input = copy.deepcopy(source)  # (each branch reads it: df["text"] stays a column read)
            else:
                branch_input = self.helper(COLUMNS, [source, owner, ast.Constant(position)])
            if isinstance(branch, str):  # a FeatureUnion's 'passthrough': the input itself
                blocks.append(branch_input if union else self.assign(branch_input, branch_path, before))
                continue
            block = self.transform(branch, branch_input, branch_path, before)
            if not isinstance(block, ast.Name) or block.id == getattr(source, "id", None):
                block = self.assign(block, branch_path, before)
            blocks.append(block)
        self.expansion._joins.append((composite, output_config(composite)))
        entries = ast.List([copy.copy(b) for b in blocks], ast.Load())
        joined = self.helper(UNION_STACK, [owner, entries]) if union else self.helper(COLUMN_STACK, [owner, entries, source])
        return self.assign(joined, path, before)

    def bind(self, obj, path: str) -> ast.Name:
        """A name the rewritten code reads ``obj`` under."""
        for name, known in self.expansion.names.items():
            if known is obj:
                return ast.Name(name, ast.Load())
        name = self.fresh(path)
        self.expansion.names[name] = obj
        self.expansion.display[name] = path
        return ast.Name(name, ast.Load())

    def assign(self, value: ast.expr, path: str, before: list, role: str = "") -> ast.Name:
        name = self.fresh(path + (f" {role}" if role else ""))
        self.expansion.display[name] = _step_label(path) + (f"_{role}" if role else "")
        before.append(ast.Assign([ast.Name(name, ast.Store())], value))
        return ast.Name(name, ast.Load())

    def helper(self, helper: str, arguments: list) -> ast.Call:
        self.helpers.add(helper)
        return ast.Call(ast.Name(helper, ast.Load()), arguments, [])

    def fresh(self, path: str) -> str:
        self.count += 1
        label = _NOT_WORD.sub("_", _step_label(path)).strip("_")[:30]
        return f"{PREFIX}{self.count}_{label}"

    def located(self, statement: ast.stmt) -> ast.stmt:
        return ast.fix_missing_locations(_located(statement, self.location))


def _aliases(statement: ast.stmt, last: ast.stmt | None) -> bool:
    """Whether ``statement`` is ``name = temporary`` of the temporary ``last`` binds (the user's
    ``X = composite.transform(df)`` written out): binding ``name`` there keeps the result one
    call's, which the calls reading ``name`` may keep in their own form."""
    return (
        isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Name) and isinstance(last, ast.Assign)
        and [t.id for t in last.targets if isinstance(t, ast.Name)] == [statement.value.id]
    )


def _calls_helper(node: ast.expr, helper: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == helper


def _reads_again_alike(value: ast.expr) -> bool:
    """A name, or a name's item by a constant (``df["text"]``): reading it once per branch gives
    the same value and runs no code of the user's."""
    if isinstance(value, ast.Subscript):
        return isinstance(value.value, ast.Name) and isinstance(value.slice, ast.Constant)
    return isinstance(value, ast.Name)


def _step_label(path: str) -> str:
    """``pipe['prep'].named_transformers_['text']`` -> ``prep__text``: scikit-learn's parameter
    path of a step (the composite's own name left out)."""
    names = re.findall(r"\['([^']*)'\]|\[\"([^\"]*)\"\]", path)
    parts = [a or b for a, b in names]
    return "__".join(parts) if parts else path


def _named_estimators(ensemble, path: str) -> list:
    """(path, fitted estimator) of a vote's or stack's ``estimators_``, by their names."""
    names = [name for name, estimator in ensemble.estimators if not (isinstance(estimator, str) and estimator == "drop")]
    return [(f"{path}.named_estimators_[{name!r}]", estimator) for name, estimator in zip(names, ensemble.estimators_)]


def _branches(composite):
    """(position, name, transformer, selection) of the branches a composite's transform runs."""
    if type(composite) is FeatureUnion:
        for position, (name, branch) in enumerate(composite.transformer_list):
            if not (isinstance(branch, str) and branch == "drop"):
                yield position, (name, branch, None)
        return
    for position, (name, branch, selection) in enumerate(composite.transformers_):
        if (isinstance(branch, str) and branch == "drop") or _is_empty_column_selection(selection):
            continue
        yield position, (name, branch, selection)


def _not_written_out(composite, method: str) -> str | None:
    """Why ``composite.method(X)`` stays one call, or None when it can be written out."""
    if not hasattr(composite, method):
        return f"{type(composite).__name__} has no {method}"
    try:
        check_is_fitted(composite)
    except NotFittedError:
        return _UNFITTED
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    kind = type(composite)
    if kind in (Pipeline, TransformedTargetRegressor, CalibratedClassifierCV, *_VOTERS):
        return None
    if getattr(composite, "transformer_weights", None):
        return "transformer_weights are set"
    output = output_config(composite)
    if output != "default" and (kind is not ColumnTransformer or output != "pandas"):
        return f'set_output(transform="{output}") makes it return {output} frames'
    if kind in _STACKS:
        return "a multilabel target" if isinstance(getattr(composite, "_label_encoder", None), list) else None
    if not any(True for _ in _branches(composite)):
        return "every branch is dropped"
    if kind is FeatureUnion:
        strings = [b for _, (_, b, _) in _branches(composite) if isinstance(b, str) and b != "passthrough"]
        if strings:
            return f"a branch given as {strings[0]!r}"
    else:
        for _, (_, branch, _) in _branches(composite):
            if isinstance(branch, str):
                return f"a fitted branch given as {branch!r}"
    return None


_UNFITTED = "it was not fitted when the function was decorated: it is read as its steps once fitted"


def _final(composite):
    """The object fitting changes last: a Pipeline's final step, else the composite."""
    return composite.steps[-1][1] if type(composite) is Pipeline and composite.steps else composite


def _composite_call(statement: ast.stmt, resolver):
    """(call, composite, name) of the statement's first composite call written out in place, or None.

    The call is ``<name>.<method>(X)`` on a global or closure variable holding a Pipeline,
    FeatureUnion, ColumnTransformer, TransformedTargetRegressor, vote, stack or calibrated classifier, of a
    method in READ_AS_STEPS;
    its steps run before the statement's other code, so the statement's other calls must come
    after it (or take its result)."""
    if not isinstance(statement, (ast.Return, ast.Assign, ast.Expr, ast.AnnAssign)) or statement.value is None:
        return None
    for node in walk_scope(statement.value):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in (*MODEL_METHODS, "transform") and len(node.args) == 1 and not node.keywords
            and not isinstance(node.args[0], ast.Starred) and isinstance(node.func.value, ast.Name)
        ):
            continue
        name = node.func.value.id
        code = resolver.func.__code__
        if name in code.co_varnames or name in code.co_cellvars or name in resolver.local_imports:
            continue  # a local variable: what it holds is known only when the function runs
        composite = resolver.resolve(node.func.value)
        if node.func.attr in READ_AS_STEPS.get(type(composite), ()):
            if _runs_first(statement.value, node):
                return node, composite, name
    return None


def _runs_first(value: ast.expr, call: ast.Call) -> bool:
    """Is ``call`` evaluated before any other call of ``value`` (besides those inside it and
    those taking its result), and on every evaluation of ``value``?"""
    inside = {id(n) for n in ast.walk(call)}
    parents = {}
    for node in ast.walk(value):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    ancestors, node = set(), call
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, (ast.IfExp, ast.BoolOp, ast.Compare, ast.Lambda, ast.comprehension)):
            return False
        ancestors.add(id(node))
    end = (call.end_lineno, call.end_col_offset)
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and id(node) not in inside and id(node) not in ancestors:
            if (node.lineno, node.col_offset) < end and not _written_out(node):
                return False
    return True


def _written_out(call: ast.Call) -> bool:
    """A call of a fitted object or helper an expansion bound (an earlier composite's final estimator, in
    ``0.6 * a.predict(X) + 0.4 * b.predict(X)``): it computes what it did where it was, so the next
    composite's steps may run before it."""
    func = call.func
    while isinstance(func, (ast.Attribute, ast.Subscript)):
        func = func.value
    return isinstance(func, ast.Name) and func.id.startswith(PREFIX)


def _located(statement: ast.stmt, at: ast.stmt) -> ast.stmt:
    """``statement`` (new code) at ``at``'s position: tracebacks point at the user's line."""
    for node in ast.walk(statement):
        if "lineno" in node._attributes:
            node.lineno, node.col_offset = at.lineno, at.col_offset
            node.end_lineno, node.end_col_offset = at.end_lineno, at.end_col_offset
    return statement
