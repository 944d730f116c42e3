"""A test that hangs on a cluster shows where its workers are, not only the driver."""

import os
import subprocess
import sys
import textwrap

from conftest import REPO


def test_a_hung_test_shows_its_workers_stacks(tmp_path):
    """The suite's conftest, as a plugin of a pytest run of one test stuck in a worker task:
    shortly before pytest-timeout fails it, each worker of the cluster fixture dumped every
    thread's stack into the test's captured stderr, the stuck function among them. The
    worker stuck is one the nanny started again (a restart): it was armed too."""
    (tmp_path / "test_stuck.py").write_text(textwrap.dedent("""
        import time

        import pytest


        def stuck_in_a_worker():
            time.sleep(120)


        @pytest.mark.timeout(60)  # the dump at 45 s: the cluster is up by then, even busy
        def test_stuck(client1):
            client1.restart()
            client1.submit(stuck_in_a_worker, pure=False).result()
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
         "test_stuck.py"], cwd=tmp_path, capture_output=True, text=True, timeout=240,
        env=dict(os.environ, PYTHONPATH=str(REPO / "tests")))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Timeout" in out and "1 failed" in out, out[-3000:]
    assert "s before its timeout, the stacks of the cluster fixtures' 1 worker processes" \
        in out, out[-3000:]
    assert 'in stuck_in_a_worker' in out, out[-5000:]
