"""dask-ps in its own words: an L-BFGS fit's passes are function evaluations (beside its
iterations), Python warnings are one ``dask-ps: warning:`` line, and the advice of errors and
warnings raised by the estimators names the command's options, not their parameters."""

import argparse
import re
import shlex
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from test_cli import _scheduler_file, _svm
from test_cli_resume import _ratings

from dask_ps.cli import _parser, main
from dask_ps.cli._options import columns
from dask_ps.cli._words import cli_words


def _command(name):
    """The sub-parser of ``dask-ps train NAME``, or of ``dask-ps evaluate``."""
    parser, parsers = _parser()
    if name in parsers:
        return parsers[name]
    return next(a for a in parser._actions if isinstance(a.choices, dict)).choices[name]


PAST = ("resume: checkpoint 'ck' version 4 is at epoch 83, past the 50 epochs of this fit "
        "(max_iter): its tables are those of 83 epochs, which a fit of 50 cannot return; set "
        "max_iter=83 or more to go on from it, or fit afresh (resume=False, or another "
        "checkpoint folder)")


@pytest.mark.parametrize("command, text, said", [
    ("lr", PAST, "resume: checkpoint 'ck' version 4 is at epoch 83, past the 50 epochs of "
     "this fit (--max-iter): its tables are those of 83 epochs, which a fit of 50 cannot "
     "return; set --max-iter 83 or more to go on from it, or fit afresh (--resume never, or "
     "another checkpoint folder)"),
    ("lr", "L-BFGS-B stopped at max_iter=5 iterations before the gradient norm reached "
     "tol=1e-06; increase max_iter", "L-BFGS-B stopped at max_iter=5 iterations before the "
     "gradient norm reached tol=1e-06; increase --max-iter"),
    ("lr", "the objective is inf: scale the features (e.g. MaxAbsScaler) or lower C",
     "the objective is inf: scale the features (e.g. MaxAbsScaler) or lower --C"),
    ("fm", "try a smaller init_std (now 10), learning_rate (now 0.1) or factor_learning_rate "
     "(now 0.02)", "try a smaller --init-std (now 10), --learning-rate (now 0.1) or "
     "--factor-learning-rate (now 0.02)"),
    ("mf", "try a smaller learning_rate (now 0.06) or a larger reg",
     "try a smaller --learning-rate (now 0.06) or a larger --reg"),
    ("mf", "scale the ratings down or use solver='als' (float64)",
     "scale the ratings down or use --solver als (float64)"),
    ("mf", "r.tsv, line 1: bad (is line 1 a header? pass header=True)",
     "r.tsv, line 1: bad (is line 1 a header? pass --header)"),
    ("evaluate", "r.tsv, line 1: bad (is line 1 a header? pass header=True)",
     "r.tsv, line 1: bad (is line 1 a header? pass --header)"),
    ("gbdt", "lower max_leaf_nodes or max_bins, use fewer classes",
     "lower --max-leaf-nodes or --max-bins, use fewer classes"),
    ("lda", "set max_iter=9 or more (n_components)", "set --max-iter 9 or more (--topics)"),
    # the readers' hints: settings after one verb are one command line, quoted for a shell
    ("fm", "(is this a table of fields separated by ';'? use format='csv', sep=';')",
     "(is this a table of fields separated by ';'? use --format csv --sep ';')"),
    ("gbdt", "use format='csv', sep='\\t', header=False",
     "use --format csv --sep '\\t' --no-header"),
    ("lr", "(is this a Parquet file? use format='parquet')",
     "(is this a Parquet file? use --format parquet)"),
    ("evaluate", "is that the delimiter? (use sep='|')", "is that the delimiter? (use --sep '|')"),
    ("mf", "is that the delimiter? (use sep=',')", "is that the delimiter? (use --sep ,)"),
    ("lr", "use label='my click'", "use --label 'my click'"),
    # a list of columns as the option takes it, comma-separated; alternatives after one verb
    ("lr", "cannot be a feature; leave it out (use exclude=['tags'])",
     "cannot be a feature; leave it out (use --exclude tags)"),
    ("fm", "leave them out (use exclude=['id', 'my tags'])",
     "leave them out (use --exclude 'id,my tags')"),
    ("gbdt", "(string); use categorical=['c', 'shop']", "(string); use --categorical c,shop"),
    ("lr", "name it in the header, or use numeric=['price', 'Unnamed: 0'] or "
     "categorical=['Unnamed: 0']", "name it in the header, or use --numeric 'price,Unnamed: "
     "0' or --categorical 'Unnamed: 0'"),
    # kept: a parameter the command has no option for, a value its option does not take, a
    # refused parameter quoted (not advice), evaluate's --resume (it has none)
    ("gbdt", "set max_iter=83 or more", "set max_iter=83 or more"),
    ("lr", "lower max_leaf_nodes", "lower max_leaf_nodes"),
    ("mf", "use solver='newton'", "use solver='newton'"),
    ("lr", "--penalty: penalty='l1' needs solver='ftrl' or 'lbfgs' (OWL-QN)",
     "--penalty: penalty='l1' needs solver='ftrl' or 'lbfgs' (OWL-QN)"),
    ("evaluate", "fit afresh (resume=False)", "fit afresh (resume=False)"),
    ("mf", "use format='csv', sep=';'", "use format='csv', --sep ';'"),
    ("lr", "use format='avro'", "use format='avro'"),
    ("lr", "label column 'y' (label)", "label column 'y' (label)"),
    ("gbdt", "leave it out (use exclude=['tags'])", "leave it out (use exclude=['tags'])"),
    ("lr", "use numeric=[''] or categorical=['']", "use numeric=[''] or categorical=['']"),
    ("lr", "use numeric=['a,b'], exclude=[' c']", "use numeric=['a,b'], exclude=[' c']"),
    ("lr", "use exclude=[3], label=['y']", "use exclude=[3], label=['y']"),
    ("lr", "use exclude=[]", "use exclude=[]"),
    ("lr", "use numeric=[''] or categorical=['a']", "use numeric=[''] or --categorical a"),
])
def test_advice_is_said_in_the_commands_options(command, text, said):
    assert cli_words(text, _command(command)) == said


def test_a_list_is_said_as_the_parser_takes_it_back():
    """A list value becomes what the option's parser turns back into the same list: one
    comma-separated value (a column list), the values after the option (nargs='+'), the
    option once a value (action='append')."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", nargs="+")
    parser.add_argument("--tag", action="append")
    parser.add_argument("--cols", type=columns)
    text = "use names=['a', 'b c'], tag=['x', \"it's\"], cols=['p', 'q r']"
    said = cli_words(text, parser)
    assert said == "use --names a 'b c' --tag x --tag 'it'\"'\"'s' --cols 'p,q r'"
    assert vars(parser.parse_args(shlex.split(said[4:]))) == \
        {"names": ["a", "b c"], "tag": ["x", "it's"], "cols": ["p", "q r"]}
    lr = _command("lr")
    said = cli_words("use exclude=['id', 'my tags'], numeric=['Unnamed: 0']", lr)
    parsed = lr.parse_args(["--train", "t.csv", *shlex.split(said[4:])])
    assert (parsed.exclude, parsed.numeric) == (["id", "my tags"], ["Unnamed: 0"])


def test_a_flag_takes_python_true_and_false():
    assert cli_words("pass fit_intercept=False, or set early_stopping=True",
                     _command("lr")) == "pass --no-fit-intercept, or set --early-stopping"
    assert cli_words("fit afresh (resume=False); resume=True needs a checkpoint",
                     _command("mf")) == "fit afresh (--resume never); --resume auto needs a " \
                                        "checkpoint"


@pytest.mark.timeout(200)
@pytest.mark.filterwarnings("default::sklearn.exceptions.ConvergenceWarning")  # as outside
def test_lbfgs_says_evaluations_and_warnings_are_one_line(client1, tmp_path, capsys):
    """--solver lbfgs --max-iter 3 printed history rows "epoch 1 evaluation 1 ..." and "4
    epochs" in its rate line (they are function evaluations, one more than the iterations),
    and its ConvergenceWarning as Python does, the console script's file and line, then
    "  sys.exit(main())", advising "increase max_iter"; now "evaluation" rows, "4
    evaluations, 3 L-BFGS iterations", and one warning line in the command's words.
    showwarning is restored after; --debug leaves warnings to Python."""
    labels = np.tile([-1, 1], 200)
    labels[::7] *= -1  # not separable: the fit does not converge in 3 iterations
    train = _svm(tmp_path / "tr.svm", labels)
    argv = ["train", "lr", "--train", train, "--solver", "lbfgs", "--max-iter", "3",
            "--history", "0", "--scheduler-file", _scheduler_file(client1, tmp_path)]
    before = warnings.showwarning
    assert main(argv) == 0
    assert warnings.showwarning is before
    out = capsys.readouterr()
    rows = [x for x in out.out.splitlines() if x.startswith("  ")]
    assert rows and all(re.match(rf"  evaluation {i + 1}  loss ", x)
                        for i, x in enumerate(rows)), out.out
    n = len(rows)
    assert re.search(rf"^train wall [\d.]+ s \({n} evaluations, 3 L-BFGS iterations, [\d.]+ "
                     rf"s; the other .*; first evaluation [\d.]+ s .*\({n - 1} evaluations "
                     rf"over [\d,]+ non-zeros\)$", out.out, re.M), out.out
    assert not re.search(r"\bepochs?\b", out.out), out.out  # (its records keep epoch_time)
    warned = [x for x in out.err.splitlines() if "warning" in x.lower()]
    assert warned == ["dask-ps: warning: ConvergenceWarning: L-BFGS-B stopped at max_iter=3 "
                      "iterations before the gradient norm reached tol=1e-06; increase "
                      "--max-iter"], out.err
    assert "sys.exit" not in out.err and ".py:" not in out.err, out.err

    with pytest.warns(ConvergenceWarning, match=r"; increase max_iter$"):
        assert main([*argv, "--debug"]) == 0  # Python's warning, to pytest's record here
    assert "dask-ps: warning" not in capsys.readouterr().err


@pytest.mark.timeout(200)
@pytest.mark.filterwarnings("default::UserWarning")  # said, as outside pytest
def test_readers_advice_names_the_column_options(client1, tmp_path, capsys):
    """A column without a name (a pandas index) was left out with a warning advising "list
    it in numeric= or categorical= (--numeric, --categorical)", both languages, neither
    saying the columns the command had listed; now the options, the column added to those
    given (a Parquet list column's --exclude: tests/test_cli_inputs.py)."""
    path = tmp_path / "t.csv"
    rng = np.random.default_rng(5)
    rows = [f"{i},{c},{p:.3f},{s}" for i, (c, p, s) in enumerate(zip(
        rng.integers(0, 2, 60), rng.normal(size=60), rng.choice(list("abc"), 60)))]
    path.write_text("\n".join(["Unnamed: 0,click,price,shop", *rows]) + "\n")
    base = ["train", "lr", "--format", "csv", "--label", "click", "--max-iter", "1",
            "--scheduler-file", _scheduler_file(client1, tmp_path)]
    assert main([*base, "--train", str(path), "--numeric", "price"]) == 0
    warned = [x for x in capsys.readouterr().err.splitlines() if "has no name" in x]
    assert warned == [f"dask-ps: warning: {path}: column 1 ('Unnamed: 0') has no name of its "
                      f"own (a pandas index saved with the data?): it is not a feature; to "
                      f"use it, name it in the header, or use --numeric 'price,Unnamed: 0' "
                      f"or --categorical 'Unnamed: 0'"], warned


@pytest.mark.timeout(200)
def test_errors_advise_the_commands_options(client1, tmp_path, capsys):
    """--resume auto with a --max-iter below the checkpoint's epochs advised "set
    max_iter=2 or more ... (resume=False, ...)"; dask-ps evaluate of a test file with a
    header advised "pass header=True; dask-ps train mf: --header", another command's
    option, where evaluate has its own --header."""
    train, ck, model = _ratings(tmp_path / "tr.tsv"), tmp_path / "ck", str(tmp_path / "m.npz")
    base = ["train", "mf", "--train", train, "--n-components", "2", "--checkpoint", str(ck),
            "--scheduler-file", _scheduler_file(client1, tmp_path)]
    assert main([*base, "--max-iter", "2", "--save", model]) == 0
    capsys.readouterr()
    assert main([*base, "--max-iter", "1", "--resume", "auto"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"^dask-ps: error: resume: checkpoint .* past the 1 epoch of this fit "
                     r"\(--max-iter\): .*; set --max-iter 2 or more to go on from it, or fit "
                     r"afresh \(--resume never, or another checkpoint folder\)$", err, re.M), err

    headed = tmp_path / "te.tsv"
    headed.write_text("user\titem\trating\tts\n" + "".join(
        open(train).readlines()[:5]))
    assert main(["evaluate", model, "--test", str(headed)]) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("(is line 1 a header? pass --header)"), err
    assert "dask-ps train" not in err and "header=True" not in err, err
