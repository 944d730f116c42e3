"""dask-ps train's checkpoint flags: every algorithm has those of its estimator, and an MF run
with --checkpoint is continued by --resume auto (MF had --resume but no --checkpoint)."""

import re

import numpy as np
import pytest
from test_cli import _scheduler_file

from dask_ps.cli import _parser, main
from dask_ps.cli._registry import ALGORITHMS
from dask_ps.cli._run import build_estimator


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_has_its_estimators_checkpoint_flags(name, tmp_path):
    """The estimator's parameters are the source of truth: each of checkpoint,
    checkpoint_every and max_recoveries it has is a flag, and --resume auto reaches it."""
    algo = ALGORITHMS[name]
    params = set(algo.cls().get_params())
    flags = {p.param: p.flag for p in algo.params}
    for param in ("checkpoint", "checkpoint_every", "max_recoveries"):
        if param in params:
            assert flags.get(param) == "--" + param.replace("_", "-"), (name, param)
    argv = ["train", name, "--train", "x", "--checkpoint", str(tmp_path / "ck"),
            "--checkpoint-every", "2", "--max-recoveries", "1", "--resume", "auto"]
    est = build_estimator(_parser()[0].parse_args(argv), algo, shard_workers=False)
    got = est.get_params()
    assert (got["checkpoint"], got["checkpoint_every"], got["max_recoveries"], got["resume"]) \
        == (str(tmp_path / "ck"), 2, 1, True)


def _ratings(path, n=1500, seed=0):
    rng = np.random.default_rng(seed)
    users, items = rng.integers(0, 30, n), rng.integers(0, 20, n)
    r = np.clip(np.round(3 + (users % 3 - 1) + (items % 2) + rng.normal(0, 0.3, n)), 1, 5)
    path.write_text("".join(f"u{u}\ti{i}\t{x:g}\t{k}\n"
                            for k, (u, i, x) in enumerate(zip(users, items, r))))
    return str(path)


@pytest.mark.timeout(200)
def test_mf_checkpoint_then_resume_auto(client1, tmp_path, capsys):
    """A first run writes versions into --checkpoint; a second with --resume auto and more
    epochs says it resumed after epoch 2 and runs epochs 3 and 4 only. A config file's
    ``checkpoint`` key is taken as the flag is."""
    train, ck = _ratings(tmp_path / "tr.tsv"), tmp_path / "ck"
    base = ["train", "mf", "--train", train, "--n-components", "2", "--scheduler-file",
            _scheduler_file(client1, tmp_path)]
    assert main([*base, "--max-iter", "2", "--checkpoint", str(ck)]) == 0
    out = capsys.readouterr().out
    written = re.findall(rf"^checkpoint written: {re.escape(str(ck))} version (\d+)", out, re.M)
    assert written and sorted(p.name for p in ck.iterdir())[-1] == f"v{int(written[-1]):06d}"
    assert f"last checkpoint: {ck} version {written[-1]}" in out

    cfg = tmp_path / "run.toml"
    cfg.write_text(f'checkpoint = "{ck}"\nresume = "auto"\n')
    assert main([*base, "--max-iter", "4", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert (f"resumed from checkpoint: {ck} version {written[-1]}, after epoch 2 (epochs 1-2 "
            f"are not run again)") in out
    epochs = re.findall(r"MatrixFactorization\(sgd\) (\d)/4", out)
    assert epochs == ["3", "4"], out
    # the rate counts this run's 2 passes (the first left out), not the 2 restored ones
    assert re.search(r"^train wall [\d.]+ s \(2 epochs [\d.]+ s; the other [\d.]+ s: .*\); "
                     r"first epoch [\d.]+ s .*, then [\d.]+ (?:[kM] )?\S+/s \(1 epoch over [\d,]+ "
                     r"\S+; epochs 1-2 restored from the checkpoint\)$",
                     out, re.M), out


def test_the_resumed_line_names_each_algorithms_passes():
    """After a resume the line said "after epoch N" for GBDT's rounds and LDA's iterations
    too; it takes the algorithm's word for a pass, as the rate line does."""
    from dask_ps.cli._report import resumed_line

    assert resumed_line("ck", 3, 2, ALGORITHMS["gbdt"].passes) == (
        "resumed from checkpoint: ck version 3, after round 2 (rounds 1-2 are not run again)")
    assert resumed_line("ck", 1, 0, ALGORITHMS["lda"].passes) == (
        "resumed from checkpoint: ck version 1, before iteration 1")
    assert resumed_line("ck", 5, 4, ALGORITHMS["mf"].passes).endswith(
        "after epoch 4 (epochs 1-4 are not run again)")
    assert resumed_line("ck", 2, 1, "epoch").endswith("after epoch 1 (epoch 1 is not run again)")


def _svm(path, n=300, seed=0):
    """One-based LIBSVM rows whose class shows in feature 1, with noise in 2..6."""
    rng = np.random.default_rng(seed)
    path.write_text("".join(
        f"{i % 2} 1:{(i % 2) + rng.normal(0, 0.3):.3f} "
        + " ".join(f"{j}:{rng.random():.3f}" for j in range(2, 7)) + "\n" for i in range(n)))
    return str(path)


@pytest.mark.timeout(200)
def test_gbdt_checkpoint_then_resume_auto_says_rounds(client1, tmp_path, capsys):
    """A GBDT run continued by --resume auto says where it resumed, and its checkpoint
    line, in rounds (it said "after epoch 2 (epochs 1-2 ...)" and "every 1 epoch(s)")."""
    train, ck = _svm(tmp_path / "tr.svm"), tmp_path / "ck"
    base = ["train", "gbdt", "--train", train, "--max-leaf-nodes", "4", "--checkpoint",
            str(ck), "--scheduler-file", _scheduler_file(client1, tmp_path)]
    assert main([*base, "--n-estimators", "2"]) == 0
    out = capsys.readouterr().out
    assert f"checkpoint: {ck} every 1 round\n" in out
    written = re.findall(rf"^checkpoint written: {re.escape(str(ck))} version (\d+)", out, re.M)
    assert written
    assert main([*base, "--n-estimators", "4", "--resume", "auto"]) == 0
    out = capsys.readouterr().out
    assert (f"resumed from checkpoint: {ck} version {written[-1]}, after round 2 (rounds 1-2 "
            f"are not run again)") in out, out
    said = [x for x in out.splitlines() if not x.startswith("  ")]  # (history: its keys)
    assert not [x for x in said if "epoch" in x], out
    assert re.search(r"; rounds 1-2 restored from the checkpoint\)$", out, re.M), out


@pytest.mark.timeout(200)
@pytest.mark.filterwarnings("default::UserWarning")  # said, as outside pytest
def test_resume_auto_of_a_folder_of_torn_versions_says_so_in_one_warning_line(client1,
                                                                              tmp_path,
                                                                              capsys):
    """Every version of --checkpoint torn (no manifest.json, or one that is not JSON): --resume
    auto started from epoch 1 without a word; now one ``dask-ps: warning:`` line names each
    torn version and why, and says the run starts from its first epoch."""
    train, ck = _svm(tmp_path / "tr.svm"), tmp_path / "ck"
    base = ["train", "lr", "--train", train, "--checkpoint", str(ck), "--scheduler-file",
            _scheduler_file(client1, tmp_path)]
    assert main([*base, "--max-iter", "2"]) == 0
    capsys.readouterr()
    names = sorted((p.name for p in ck.iterdir() if p.name.startswith("v")), reverse=True)
    for name in names:
        (ck / name / "manifest.json").unlink()
    (ck / names[0] / "manifest.json").write_text("{not json")
    assert main([*base, "--max-iter", "3", "--resume", "auto"]) == 0
    out, err = capsys.readouterr()
    said = [x for x in err.splitlines() if "torn" in x]
    assert len(said) == 1 and said[0].startswith(
        "dask-ps: warning: TornCheckpointWarning: resume: no complete checkpoint version at "
        f"{str(ck)!r}: every version is torn"), err
    assert (f"{names[0]}: manifest.json is not valid JSON (truncated or damaged): Expecting "
            f"property name enclosed in double quotes at line 1, column 2; {names[1]}: no "
            f"manifest.json") in said[0], said
    assert "the fit starts from its first epoch" in said[0], said
    assert "resumed from checkpoint" not in out, out


@pytest.mark.timeout(200)
@pytest.mark.filterwarnings("default::UserWarning")  # said, as outside pytest
def test_resume_auto_of_a_folder_of_damaged_versions_starts_afresh(client1, tmp_path, capsys):
    """Every version of --checkpoint damaged (a chunk deleted, the manifests there):
    --resume auto stopped with status 2 once the cluster had started ("no complete
    checkpoint version at ..."), where a folder of torn versions starts afresh; now it
    starts afresh too, with one warning line naming the damaged versions, and leaves them
    in the folder (the run's versions numbered after them)."""
    train, ck = _svm(tmp_path / "tr.svm"), tmp_path / "ck"
    base = ["train", "lr", "--train", train, "--checkpoint", str(ck), "--scheduler-file",
            _scheduler_file(client1, tmp_path)]
    assert main([*base, "--max-iter", "2"]) == 0
    capsys.readouterr()
    names = sorted(p.name for p in ck.iterdir() if p.name.startswith("v"))
    for name in names:
        next(p for p in (ck / name / "t0" / "values" / "c").rglob("*") if p.is_file()).unlink()
    assert main([*base, "--max-iter", "3", "--resume", "auto"]) == 0
    out, err = capsys.readouterr()
    said = [x for x in err.splitlines() if "damaged" in x]
    versions = [int(n[1:]) for n in names]
    assert len(said) == 1 and said[0].startswith(
        f"dask-ps: warning: TornCheckpointWarning: resume: checkpoint {str(ck)!r}: versions "
        f"{', '.join(map(str, versions[:-1]))} and {versions[-1]} are damaged ("), err
    assert "the fit starts from its first epoch" in said[0], said
    assert "resumed from checkpoint" not in out, out
    after = sorted(p.name for p in ck.iterdir() if p.name.startswith("v"))
    assert after[:len(names)] == names and len(after) > len(names)
