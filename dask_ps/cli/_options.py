"""Option types, the cluster options shared by the commands, and ``--config`` TOML files."""

from __future__ import annotations

import argparse
import math
import tomllib
from pathlib import Path

from .._cluster_parts import walltime_seconds
from .._cluster_scheduler import check_dashboard_address
from ..cluster import JOBQUEUE_SYSTEMS, MIN_WORKER_MEMORY, WORKER_BASE_MEMORY, ClusterSpec
from ..exceptions import OptionError

#: The largest integer option: every count, size, width and seed ends up in an int64 (a
#: NumPy array, a numba kernel), so larger values are refused while parsing, naming the option.
INT_MAX = 2**63 - 1


def _number(kind, low: float, strict: bool):
    """An argparse type: a finite ``kind`` (int or float) above ``low`` (or equal, if not
    strict); an int at most :data:`INT_MAX`. Its ``expects`` (``"an integer"``, ``"a
    number"``) says that a ``--config`` file gives it a TOML number, not a string."""
    what = "an integer" if kind is int else "a finite number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        if not (value > low if strict else value >= low):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if strict else '>='} {low:g}, got {text}")
        if kind is int and value > INT_MAX:
            raise argparse.ArgumentTypeError(
                f"must be <= 2**63 - 1 ({INT_MAX}, the largest int64), got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    parse.expects = what if kind is int else "a number"
    return parse


POSITIVE_INT = _number(int, 1, strict=False)
NON_NEGATIVE_INT = _number(int, 0, strict=False)
POSITIVE = _number(float, 0, strict=True)
NON_NEGATIVE = _number(float, 0, strict=False)


def fraction(text: str) -> float:
    """A number in (0, 1)."""
    value = POSITIVE(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"must be < 1, got {text}")
    return value


fraction.expects = "a number"


def share(text: str) -> float:
    """A number in (0, 1] (a share of rows, columns or leaves; 1: all)."""
    value = POSITIVE(text)
    if not value <= 1:
        raise argparse.ArgumentTypeError(f"must be <= 1, got {text}")
    return value


share.expects = "a number"


def _or_auto(parse, text: str, what: str):
    """``auto`` (in any case, spaces around), or what ``parse`` reads: else an error saying
    both."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return parse(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (want {what} or auto)") from None


def share_or_auto(text: str):
    """``auto``, or a number in (0, 1]."""
    return _or_auto(share, text, "a number in (0, 1]")


def workers_or_auto(text: str):
    """``auto``, or a positive integer."""
    return _or_auto(POSITIVE_INT, text, "a positive integer")


# a --config file gives these a TOML number, or the string "auto"
share_or_auto.expects, share_or_auto.auto = 'a number or "auto"', True
workers_or_auto.expects, workers_or_auto.auto = 'an integer or "auto"', True


def size(text: str) -> int:
    """A byte size such as ``64MiB``."""
    from dask.utils import parse_bytes

    try:
        n = parse_bytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 64MiB") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return n


def columns(text: str) -> list[str]:
    """A comma-separated list of column names."""
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r}: empty column name")
    return names


#: How a tab may be spelt on a command line, where a real tab is awkward to type.
TAB_SPELLINGS = ("\\t", "\\\\t", "tab", "TAB")


def separator(text: str) -> str:
    """A field delimiter: one character, or a tab spelt ``\\t`` (as the readers' hints and
    ``--help`` write it), ``\\\\t`` or ``tab``."""
    from ..io._csv import check_sep

    sep = "\t" if text in TAB_SPELLINGS else text
    try:
        return check_sep(sep)
    except ValueError as exc:
        if len(sep) == 1:  # one character, but a quote, a line end, not ASCII: which
            raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(
            f"{text!r} is not one character (e.g. ',' or ';'; a tab: '\\t')") from None


def walltime(text: str) -> str:
    """``[D-]HH:MM:SS``, ``MM:SS`` or ``M`` (minutes), read as Slurm reads it, not zero
    (:func:`dask_ps._cluster_parts.walltime_seconds`)."""
    try:
        walltime_seconds(text, "--walltime")
    except OptionError as exc:  # argparse names the option
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--walltime ")) from None
    return text


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    """The ``--cluster`` family (see :class:`dask_ps.cluster.ClusterSpec`)."""
    g = p.add_argument_group(
        "cluster", "Where the work runs: a new local cluster (default), an existing scheduler, "
        "a batch system through dask-jobqueue, or every task of one Slurm allocation "
        "(slurm-runner: srun dask-ps ... --cluster slurm-runner; task 0 runs the scheduler, "
        "task 1 this command, the others workers)")
    g.add_argument("--cluster", choices=["local", *JOBQUEUE_SYSTEMS, "slurm-runner"],
                   help="default: local, or the scheduler given by --scheduler-address/-file")
    g.add_argument("--scheduler-address", help="an existing Dask scheduler")
    g.add_argument("--scheduler-file",
                   help="an existing Dask scheduler's file (with slurm-runner: where the "
                        "scheduler writes it, default scheduler-{job_id}.json)")
    g.add_argument("--workers", type=POSITIVE_INT,
                   help="local: worker processes (default 2); slurm/pbs/sge/lsf: data worker "
                        "jobs (default 2); existing scheduler: workers to wait for (default 1)")
    g.add_argument("--cores", type=POSITIVE_INT, default=1,
                   help="threads per worker, or cores per job (default 1)")
    g.add_argument("--memory", help="memory per job (jobqueue, default 2GB) or per worker "
                                     "(local: also auto, Dask's default, or a fraction of "
                                     "the machine's memory such as 0.5); positive, at least "
                                     f"{MIN_WORKER_MEMORY >> 20}MiB (a worker of dask_ps "
                                     f"takes about {WORKER_BASE_MEMORY >> 20}MiB before any "
                                     "data); SGE jobs request none from it (only the "
                                     "workers' limit follows it): add "
                                     "--job-extra='-l h_vmem=16G' or your site's memory "
                                     "resource")
    g.add_argument("--walltime", type=walltime, default="01:00:00",
                   help="walltime of the data jobs, [D-]HH:MM:SS, MM:SS or minutes, read as "
                        "Slurm reads it (default 01:00:00); PBS and SGE get it as HH:MM:SS, "
                        "LSF as HH:MM (bsub -W, rounded up to a minute)")
    g.add_argument("--ps-workers", type=NON_NEGATIVE_INT, default=0,
                   help="jobqueue: extra jobs that hold the model's shards (resource ps=1, "
                        "never retired; default 0: shards on the data workers)")
    g.add_argument("--ps-walltime", type=walltime,
                   help="walltime of the shard jobs (default --walltime): the whole run")
    g.add_argument("--ps-memory", help="memory of the shard jobs (default --memory)")
    g.add_argument("--adapt", action="store_true",
                   help="jobqueue: keep --workers data jobs, submitting a new one when one "
                        "ends or is cancelled")
    g.add_argument("--worker-lifetime",
                   help="jobqueue: data workers close after this long, e.g. 50m (needs "
                        "--adapt and --ps-workers)")
    g.add_argument("--queue", help="queue / partition of the jobs")
    g.add_argument("--account", help="account (project on SGE, LSF) charged for the jobs")
    g.add_argument("--job-extra", action="append", default=[], metavar="DIRECTIVE",
                   help="extra batch directive for every job, e.g. --job-extra=--qos=long "
                        "(repeatable)")
    g.add_argument("--interface", help="network interface of scheduler and workers, e.g. ib0")
    g.add_argument("--log-dir", help="folder of the jobs' output files")
    g.add_argument("--local-directory", help="workers' scratch folder")
    g.add_argument("--dashboard-address", default=":0", type=_dashboard_address,
                   help="a new scheduler's dashboard: [HOST]:PORT, PORT or HOST (port 0 to "
                        "65535, 0 a free one), several joined by commas (default :0; none: "
                        "no dashboard)")
    g.add_argument("--timeout", type=POSITIVE,
                   help="seconds to wait for the scheduler and the workers (default 30; "
                        "600 for jobqueue clusters, whose jobs may queue)")


def _dashboard_address(text: str) -> str | None:
    """``--dashboard-address``: ``none`` (any case) is no dashboard (Dask's
    ``dashboard_address=None``); anything else is Dask's address, checked as Dask reads it
    (:func:`~dask_ps._cluster_scheduler.check_dashboard_address`, the check of
    :class:`~dask_ps.cluster.ClusterSpec` too).

    Raises
    ------
    argparse.ArgumentTypeError
        An address Dask cannot read (it failed as "unexpected ValueError (a bug of
        dask_ps?)" once the cluster started), or a port out of range (Dask took a free one
        instead, with a warning), named by argparse with the option (status 2).
    """
    if text.strip().lower() == "none":
        return None
    try:
        check_dashboard_address(text, name=None, none="none")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def checkpoint_url(text: str) -> str | None:
    """``--checkpoint``: ``none`` (any case, spaces around) is no checkpoint (the
    estimators' ``checkpoint=None``), as ``--dashboard-address none`` is no dashboard;
    anything else (``auto``, a folder, an fsspec URL) is passed on as given. A folder named
    ``none`` is given as ``./none``. An empty one is refused (fsspec would read it as the
    current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give a folder or URL ('.' for the "
                                          "current folder), auto or none")
    return None if text.strip().lower() == "none" else text


# a --config file gives it a string, as it gives an option without a type
checkpoint_url.takes_string = True


def join_negative_sizes(argv: list[str]) -> list[str]:
    """``--memory -1GB`` (or ``--ps-memory``) as ``--memory=-1GB``: argparse reads a value
    that starts with '-' and is not a plain negative number as a missing one ("argument
    --memory: expected one argument"); joined, it reaches :func:`ClusterSpec.check
    <dask_ps.cluster.ClusterSpec.check>`, which names it as a negative memory limit. Only
    a value that starts with '-' and a digit or '.' is joined (no option does); an
    abbreviated option name (``--mem -1GB``) is left to argparse."""
    out: list[str] = []
    for token in argv:
        if out and out[-1] in ("--memory", "--ps-memory") and len(token) > 1 \
                and token[0] == "-" and (token[1].isdigit() or token[1] == "."):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def cluster_spec(args) -> ClusterSpec:
    """The :class:`ClusterSpec` of parsed options (checked).

    Raises
    ------
    OptionError
        Contradictory options, naming them.
    """
    if args.scheduler_address and args.scheduler_file:
        raise OptionError("give --scheduler-address or --scheduler-file, not both")
    mode = args.cluster
    if mode is None:
        mode = ("address" if args.scheduler_address else "file" if args.scheduler_file
                else "local")
    elif args.scheduler_address or (args.scheduler_file and mode != "slurm-runner"):
        raise OptionError(f"--cluster {mode} starts its own scheduler: drop "
                          f"--scheduler-{'address' if args.scheduler_address else 'file'}")
    spec = ClusterSpec(
        mode=mode, workers=args.workers, cores=args.cores, memory=args.memory,
        walltime=args.walltime, ps_workers=args.ps_workers, ps_walltime=args.ps_walltime,
        ps_memory=args.ps_memory, adapt=args.adapt, worker_lifetime=args.worker_lifetime,
        queue=args.queue, account=args.account, job_extra=list(args.job_extra),
        interface=args.interface, log_dir=args.log_dir, local_directory=args.local_directory,
        address=args.scheduler_address, scheduler_file=args.scheduler_file,
        dashboard_address=args.dashboard_address, timeout=args.timeout)
    if mode == "slurm-runner" and args.workers is not None:
        raise OptionError("--workers does not apply to slurm-runner: the allocation's tasks "
                          "(srun -n) decide")
    spec.check()
    return spec


# --- --config FILE -------------------------------------------------------------------------

def _flatten(data: dict, path: str, table: str = "", tables: dict | None = None,
             names: list[str] | None = None) -> dict:
    """Top-level keys and the keys of tables (``[cluster]``, ``[model]``, ...) in one dict;
    ``tables`` (if given) gets the table of each key found in one (``"model"``,
    ``"a.b"``), for the messages naming a key.

    Raises
    ------
    OptionError
        A key set twice (``max_iter`` and ``max-iter`` are one), naming where; a table
        (nested ones too, ``[model.sgd]``) whose name is not one of ``names`` (if given),
        naming it, the closest of them and all of them.
    """
    out: dict = {}
    found: dict = {}  # key -> its table ("": the top level)
    for key, value in data.items():
        key = key.replace("_", "-")  # max_iter and max-iter are one option
        if isinstance(value, dict):
            if names is not None and key not in names:
                _unknown_table(path, f"{table}.{key}" if table else key, key, names)
            inner_tables: dict = {}
            inner = _flatten(value, path, f"{table}.{key}" if table else key, inner_tables,
                             names)
            items = [(k, v, inner_tables[k]) for k, v in inner.items()]
        else:
            items = [(key, value, table)]
        for k, v, t in items:
            if k in out:
                places = [_place(found[k]), _place(t)]
                both = (f"both {places[0]}, spelt with - and _" if places[0] == places[1]
                        else " and ".join(places))
                raise OptionError(f"{path}: {k!r} is set twice ({both})")
            out[k], found[k] = v, t
    if tables is not None:
        tables.update({k: t for k, t in found.items() if t})
    return out


def _unknown_table(path: str, table: str, name: str, names: list[str]) -> None:
    """Refuse table ``[table]`` of config file ``path``, its part ``name`` not one of the
    table ``names`` (a misspelt ``[modle]`` grouped its keys silently before).

    Raises
    ------
    OptionError
        ``"run.toml: unknown table [modle] (did you mean [model]?): tables only group the
        options, and are named [cluster], [data], [model] or [run]"``.
    """
    import difflib

    close = difflib.get_close_matches(name, names, n=1)
    mean = f" (did you mean [{table.removesuffix(name) + close[0]}]?)" if close else ""
    listed = ", ".join(f"[{n}]" for n in names[:-1]) + f" or [{names[-1]}]"
    raise OptionError(f"{path}: unknown table [{table}]{mean}: tables only group the "
                      f"options, and are named {listed}")


def table_names(parser: argparse.ArgumentParser) -> list[str]:
    """The names a ``--config`` file's tables may have: the titles of ``parser``'s groups
    of options (``dask-ps train lr --help``'s data, model, cluster and run), sorted."""
    own = (parser._positionals, parser._optionals)  # argparse's, untitled in a file
    return sorted(g.title for g in parser._action_groups if g not in own and g.title)


def _place(table: str) -> str:
    """Where a key of a config file is: ``"in table [model]"``, ``"at the top level"``."""
    return f"in table [{table}]" if table else "at the top level"


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def _given(argv: list[str], actions: dict, parser: argparse.ArgumentParser) -> set[str]:
    """Destinations of the options on the command line, and of the other members of their
    mutually exclusive groups (they override the file: ``--train`` given here drops the
    file's ``dataset``)."""
    dests = set()
    for token in argv:
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            action = actions.get(name)
            if action is None and name.startswith("--no-"):
                action = actions.get("--" + name[5:])
            if action is not None:
                dests.add(action.dest)
    for group in parser._mutually_exclusive_groups:
        members = {a.dest for a in group._group_actions}
        if members & dests:
            dests |= members
    return dests


def config_argv(path: str, parser: argparse.ArgumentParser, argv: list[str],
                command: str, algorithm: str | None = None) -> list[str]:
    """Options of TOML file ``path`` as command-line tokens for ``parser`` (placed before
    ``argv``; options in ``argv`` win).

    Keys are the long option names without dashes (``max-iter`` or ``max_iter``), at the top
    level or in a table named as a group of ``parser``'s options (``[cluster]``,
    ``[model]``, ``[data]``, ``[run]``: :func:`table_names`; tables only group them, any
    key in any of them; another name is refused, as a misspelt one).
    Booleans switch flags on or off (and give ``true``/``false`` of an option offering
    those among its choices); numbers are TOML numbers (``max-iter = 3``: a string,
    ``"3"``, is refused, as a number is for a string option; ``"auto"`` where an option
    takes it); arrays give repeatable options (``job-extra``) or comma lists
    (``categorical``), and are refused for any other option (``train``: one path or glob).
    An option on the command line wins over the file's, and over the file's other members
    of its mutually exclusive group (``--train`` over ``dataset``).

    Parameters
    ----------
    algorithm : str, optional
        The command's algorithm: an ``algorithm`` key of the file naming another one is
        refused.

    Raises
    ------
    OptionError
        Naming the file and key (and its table, for a key in one): unknown keys and tables, bad
        values (a value of another TOML type than the option's, naming the type expected),
        an ``algorithm`` other than the command's, TOML syntax errors, a file that is not
        UTF-8, a directory.
    FileNotFoundError
        No such file.
    """
    tables: dict = {}
    data = _read(path, tables, table_names(parser))
    named = _algorithm_of(data, path)
    if algorithm is not None and named is not None and named != algorithm:
        raise OptionError(f'{path}: algorithm = "{named}" is not the command\'s dask-ps '
                          f'train {algorithm}: drop the key, or run dask-ps train {named} '
                          f'--config {path}')

    actions = _actions(parser)
    given = _given(argv, actions, parser)
    tokens: list[str] = []
    for key, value in data.items():
        option = "--" + key.replace("_", "-")
        action = actions.get(option)
        table = f" ({_place(tables[key])})" if key in tables else ""
        if action is None or option in ("--config", "--help"):
            raise OptionError(f"{path}: unknown option {key!r}{table} for dask-ps {command}")
        if action.dest in given:
            continue
        where = f"{path}: {key}{table}"
        if isinstance(action, argparse.BooleanOptionalAction) or action.nargs == 0:
            if not isinstance(value, bool):
                raise OptionError(f"{where}: must be true or false, got {value!r}")
            if value:
                tokens.append(option)
            elif isinstance(action, argparse.BooleanOptionalAction):
                tokens.append("--no-" + option[2:])
            continue
        if isinstance(action, argparse._AppendAction):
            values = value if isinstance(value, list) else [value]
        elif isinstance(value, list) and action.type is columns:
            values = [",".join(str(v) for v in value)]
        elif isinstance(value, list):
            several = (": for several files, one glob such as 'logs/*.csv'"
                       if action.dest in ("train", "test") else "")
            raise OptionError(f"{where}: takes one value, not a list {value!r}{several}")
        else:
            values = [value]
        for v in values:
            if isinstance(v, bool) and {"true", "false"} <= set(action.choices or ()):
                v = str(v).lower()  # zero-based = true: a choice of auto, true, false
            if isinstance(v, (dict, list)) or isinstance(v, bool):
                raise OptionError(f"{where}: unexpected value {v!r}")
            metavar = action.metavar or action.dest.upper()
            if (action.type is None or getattr(action.type, "takes_string", False)) \
                    and not isinstance(v, str):  # a path, a name, a URL
                raise OptionError(f"{where}: must be a string ({option} {metavar}), got "
                                  f"{v!r}: quote it, {key} = \"{v}\"")
            expects = getattr(action.type, "expects", None)  # a number, maybe "auto"
            if expects and isinstance(v, str) and not (
                    getattr(action.type, "auto", False) and v.strip().lower() == "auto"):
                try:
                    action.type(v)
                    fix = f": drop the quotes, {key} = {v.strip()}"
                except argparse.ArgumentTypeError:
                    fix = ""
                raise OptionError(f"{where}: must be {expects} ({option} {metavar}), got the "
                                  f"string {v!r}{fix}")
            text = str(v)
            if action.type is not None:
                try:
                    converted = action.type(text)
                except argparse.ArgumentTypeError as exc:
                    raise OptionError(f"{where}: {exc}") from None
            else:
                converted = text
            if action.choices is not None and converted not in action.choices:
                raise OptionError(f"{where}: {v!r} is not one of {list(action.choices)}")
            tokens.append(f"{option}={text}")
    return tokens


def config_path(argv: list[str]) -> str | None:
    """The value of ``--config`` in ``argv``, if any."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    ns, _ = pre.parse_known_args(argv)
    return ns.config


def _read(path: str, tables: dict | None = None, names: list[str] | None = None) -> dict:
    """The options of TOML file ``path``, tables flattened (see :func:`_flatten`; ``tables``
    gets the table of each key found in one; ``names``: the tables' names, if checked).

    Raises
    ------
    OptionError
        Naming the file: not a file, not UTF-8, not TOML, a key set twice, a table not
        one of ``names``. A leading UTF-8 byte order mark is dropped (not refused).
    FileNotFoundError
        No such file.
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"--config {path}: no such file") from None
    except IsADirectoryError:
        raise OptionError(f"--config {path}: a directory, not a TOML file") from None
    except OSError as exc:  # e.g. no permission: the reason, naming the option
        raise OSError(f"--config {path}: {exc.strerror or exc}") from None
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 BOM, which tomllib refuses
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = bom + exc.start  # the offset in the file
        utf16 = raw[:2] in (b"\xff\xfe", b"\xfe\xff")  # what some Windows editors save
        hint = ", a UTF-16 byte order mark" if utf16 else ""
        raise OptionError(f"{path}: not UTF-8 text (byte 0x{raw[at]:02x} at offset "
                          f"{at}{hint}): save the TOML file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise OptionError(f"{path}: {exc}") from None
    return _flatten(data, path, "", tables, names)


def _algorithm_of(data: dict, path: str) -> str | None:
    """Pop the ``algorithm`` key of a file's flattened options (checked: a string)."""
    value = data.pop("algorithm", None)
    if value is not None and not isinstance(value, str):
        raise OptionError(f"{path}: algorithm must be a string, got {value!r}")
    return value


def read_algorithm(path: str) -> str | None:
    """The ``algorithm`` key of a config file (for ``dask-ps train --config FILE``), at the
    top level or in a table.

    Raises
    ------
    OptionError, FileNotFoundError
        As :func:`config_argv`.
    """
    return _algorithm_of(_read(path), path)


def data_root() -> Path:
    """``$DASK_PS_DATA``, default ``../shared/data`` beside the repository holding dask_ps
    (as the tests read it), whatever the current folder. Set empty (or to spaces), it is
    unset: the default, not the current folder."""
    import os

    repo = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("DASK_PS_DATA", "").strip() or repo.parent / "shared" / "data")
