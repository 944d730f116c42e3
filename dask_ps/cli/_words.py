"""The command line's spelling of the estimators' advice: an error or a warning raised by an
estimator or a reader says what to change in Python's words (``set max_iter=83 or more``,
``fit afresh (resume=False)``, ``increase max_iter``, ``pass header=True``); ``dask-ps``
prints it in its options' words (``set --max-iter 83 or more``, ``fit afresh (--resume
never)``, ``increase --max-iter``, ``pass --header``), translated here, where its error and
warning lines are printed (:func:`dask_ps.cli.main`), by :func:`cli_words`.

Only advice is translated (a parameter after a verb that says to change it), and only into
an option of the command that ran (a parameter it has no option for keeps its name): a
message quoting the parameters it refuses (``penalty='l1' needs solver='ftrl'``) is left as
it is, after the flags the command names before it. A list of column names is said as the
option takes it (``use exclude=['id', 'tags']``: ``use --exclude id,tags``).
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex

from ._options import columns

__all__ = ["cli_words", "option_of"]

#: Values a parameter takes in Python whose option spells them otherwise (the choices of
#: ``--resume``).
_VALUES = {("resume", "False"): "never", ("resume", "True"): "auto"}

#: Verbs of advice that set a parameter: ``set max_iter=83``, ``pass header=True``.
_SET = r"\b(set|pass|use|give|try) "
#: Verbs of advice that change a parameter named after them: ``increase max_iter``, ``try a
#: smaller learning_rate (now 0.1) or factor_learning_rate``.
_CHANGE = r"\b(increase|lower|raise|reduce|smaller|larger) "
_ITEM = r"""(?:'[^']*'|"[^"]*"|[\w.+-]+)"""
#: A list of values: ``['id', 'tags']``.
_LIST = rf"\[(?:{_ITEM}(?:, {_ITEM})*)?\]"
_VALUE = rf"({_LIST}|{_ITEM})"
#: Settings after one verb, one command line (``use format='csv', sep=';', header=False``)
#: or alternatives (``use numeric=['a'] or categorical=['a']``).
_RUN = rf"(\w+=(?:{_LIST}|{_ITEM})(?:(?:, | or )\w+=(?:{_LIST}|{_ITEM}))*)"


def option_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The options of ``parser`` (a command's sub-parser) by the parameter they set (their
    ``dest``), those with a long option string (``--max-iter``) only."""
    return {a.dest: a for a in parser._actions
            if any(s.startswith("--") for s in a.option_strings)}


def _flag(action: argparse.Action) -> str:
    return next(s for s in action.option_strings if s.startswith("--"))


def _listing(action: argparse.Action, value: str) -> str | None:
    """``action``'s option given the list ``value`` (a Python literal of strings, ``['id',
    'tags']``) as the parser takes it: comma-separated for a column list (``--exclude
    id,tags``), else one option string and its values (``nargs='+'``), or the option once a
    value (``action='append'``); None if it cannot take it."""
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return None
    if not items or not all(isinstance(v, str) for v in items):
        return None
    if action.choices is not None and not set(items) <= set(action.choices):
        return None
    flag = _flag(action)
    if action.type is columns:
        joined = ",".join(items)
        try:
            if columns(joined) != items:  # a name with a comma or edge spaces
                return None
        except argparse.ArgumentTypeError:  # an empty name
            return None
        return f"{flag} {shlex.quote(joined)}"
    if action.nargs in ("+", "*"):
        return " ".join([flag, *map(shlex.quote, items)])
    if isinstance(action, argparse._AppendAction):
        return " ".join(f"{flag} {shlex.quote(v)}" for v in items)
    return None


def _setting(action: argparse.Action, value: str) -> str | None:
    """``action``'s option given ``value`` (a Python literal: ``83``, ``'als'``, ``True``,
    ``['id', 'tags']``) on the command line, or None if it cannot take it."""
    if value.startswith("["):
        return _listing(action, value)
    flag = _flag(action)
    value = _VALUES.get((action.dest, value), value)
    if value[:1] in "'\"" and value[-1:] == value[:1] and len(value) > 1:
        value = value[1:-1]
    said = shlex.quote(value)  # as typed in a shell: --sep ';'
    negated = isinstance(action, argparse.BooleanOptionalAction)  # --header, --no-header
    if action.nargs == 0 or negated:
        if value == "True" and (negated or action.const is True):  # (store_true)
            return flag
        if value == "False" and negated:
            return "--no-" + flag[2:]
        return None
    if action.choices is not None and value not in action.choices:
        return None
    return f"{flag} {said}"


def cli_words(text: str, parser: argparse.ArgumentParser | None) -> str:
    """``text`` (an error's or a warning's message) with the advice in estimator parameters
    spelled as the options of ``parser``, the sub-parser of the command that ran (None: the
    text as it is).

    ``set P=V`` (also after pass, use, give, try) becomes ``set --p V`` (a flag's ``True``:
    ``--p``, ``False``: ``--no-p``; a value quoted as a shell needs it, ``--sep ';'``; a
    list of column names as the option takes it, ``exclude=['id', 'tags']``: ``--exclude
    id,tags``), settings listed after one verb one command line (``use format='csv',
    sep=';'``: ``use --format csv --sep ';'``), alternatives after one verb each an option
    (``use numeric=['a'] or categorical=['a']``: ``use --numeric a or --categorical a``);
    ``resume=False`` (anywhere) ``--resume never``. For the
    estimator's parameters (the options :func:`~._params.add_params` made) also
    ``increase P`` (after lower, raise, reduce, smaller, larger too), with the parameters
    listed after it (``P (now 0.1), Q or R``), becomes ``increase --p``, and ``(P)``, a
    parameter named in parentheses (``the 50 epochs of this fit (max_iter)``), ``(--p)``.
    A parameter without an option, or a value its option does not take, keeps Python's
    spelling.

    Examples
    --------
    ``"set max_iter=83 or more to go on from it, or fit afresh (resume=False, or another
    checkpoint folder)"`` becomes ``"set --max-iter 83 or more to go on from it, or fit
    afresh (--resume never, or another checkpoint folder)"`` in ``dask-ps train lr``.
    """
    if parser is None:
        return text
    options = option_of(parser)
    if not options:
        return text

    def alternatives(dests) -> str:
        return "|".join(re.escape(d) for d in sorted(dests, key=len, reverse=True))

    def setting(m: re.Match) -> str:
        run = m.group(2)
        pairs = list(re.finditer(rf"(\w+)={_VALUE}", run))
        said = [_setting(options[p.group(1)], p.group(2)) if p.group(1) in options else None
                for p in pairs]
        if all(s is None for s in said):
            return m.group(0)
        whole = all(s is not None for s in said)  # one command line: --format csv --sep ';'
        out = [said[0] or pairs[0].group(0)]
        for before, p, s in zip(pairs, pairs[1:], said[1:]):
            between = run[before.end():p.start()]  # ", " or " or "
            out.append((" " if whole and between == ", " else between) + (s or p.group(0)))
        return f"{m.group(1)} {''.join(out)}"

    text = re.sub(_SET + _RUN, setting, text)
    if "resume" in options:
        text = re.sub(rf"\bresume={_VALUE}",
                      lambda m: _setting(options["resume"], m.group(1)) or m.group(0), text)
    params = [d for d, a in options.items() if hasattr(a, "estimator_default")]
    if not params:
        return text
    names = alternatives(params)
    text = re.sub(rf"\(({names})\)", lambda m: f"({_flag(options[m.group(1)])})", text)
    item = rf"(?:{names})\b(?!=)(?: \(now [^)]*\))?"

    def change(m: re.Match) -> str:
        said = re.sub(rf"\b({names})\b(?!=)", lambda n: _flag(options[n.group(1)]),
                      m.group(2))
        return f"{m.group(1)} {said}"

    return re.sub(rf"{_CHANGE}({item}(?:(?:, | or | and ){item})*)", change, text)
