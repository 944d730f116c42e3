"""The command line's spelling of the estimators' advice: an error or a warning raised by an
estimator or a reader says what to change in Python's words (``set max_iter=83 or more``,
``fit afresh (resume=False)``, ``increase max_iter``, ``pass header=True``); ``dask-ps``
prints it in its options' words (``set --max-iter 83 or more``, ``fit afresh (--resume
never)``, ``increase --max-iter``, ``pass --header``), translated here, where its error and
warning lines are printed (:func:`dask_ps.cli.main`), by :func:`cli_words`.

Only advice is translated (a parameter after a verb that says to change it), and only into
an option of the command that ran (a parameter it has no option for keeps its name): a
message quoting the parameters it refuses (``penalty='l1' needs solver='ftrl'``) is left as
it is, after the flags the command names before it.
"""

from __future__ import annotations

import argparse
import re
import shlex

__all__ = ["cli_words", "option_of"]

#: Values a parameter takes in Python whose option spells them otherwise (the choices of
#: ``--resume``).
_VALUES = {("resume", "False"): "never", ("resume", "True"): "auto"}

#: Verbs of advice that set a parameter: ``set max_iter=83``, ``pass header=True``.
_SET = r"\b(set|pass|use|give|try) "
#: Verbs of advice that change a parameter named after them: ``increase max_iter``, ``try a
#: smaller learning_rate (now 0.1) or factor_learning_rate``.
_CHANGE = r"\b(increase|lower|raise|reduce|smaller|larger) "
_VALUE = r"""('[^']*'|"[^"]*"|[\w.+-]+)"""
#: Settings after one verb: ``use format='csv', sep=';', header=False``.
_RUN = r"""(\w+=(?:'[^']*'|"[^"]*"|[\w.+-]+)(?:, \w+=(?:'[^']*'|"[^"]*"|[\w.+-]+))*)"""


def option_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The options of ``parser`` (a command's sub-parser) by the parameter they set (their
    ``dest``), those with a long option string (``--max-iter``) only."""
    return {a.dest: a for a in parser._actions
            if any(s.startswith("--") for s in a.option_strings)}


def _flag(action: argparse.Action) -> str:
    return next(s for s in action.option_strings if s.startswith("--"))


def _setting(action: argparse.Action, value: str) -> str | None:
    """``action``'s option given ``value`` (a Python literal: ``83``, ``'als'``, ``True``) on
    the command line, or None if it cannot take it."""
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
    ``--p``, ``False``: ``--no-p``; a value quoted as a shell needs it, ``--sep ';'``), and
    settings listed after one verb one command line (``use format='csv', sep=';'``: ``use
    --format csv --sep ';'``); ``resume=False`` (anywhere) ``--resume never``. For the
    estimator's parameters (the options :func:`~._algorithms.add_params` made) also
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
        pairs = [(p.group(0), p.group(1), p.group(2))
                 for p in re.finditer(rf"(\w+)={_VALUE}", m.group(2))]
        said = [_setting(options[k], v) if k in options else None for _, k, v in pairs]
        if all(s is None for s in said):
            return m.group(0)
        if all(s is not None for s in said):  # one command line: --format csv --sep ';'
            return f"{m.group(1)} {' '.join(said)}"
        return f"{m.group(1)} " + ", ".join(s or p for s, (p, _, _) in zip(said, pairs))

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
