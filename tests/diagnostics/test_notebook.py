"""examples/notebooks/quickstart.ipynb runs from top to bottom in a fresh Jupyter kernel."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "notebooks" / "quickstart.ipynb"


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_quickstart_notebook_runs(data, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("DASK_PS_DATA", str(data))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")  # jupyter_core's migration warning
    # the kernel imports this checkout, installed or not
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()

    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "/dask-ps" in text
    auc = re.search(r"test AUC (\d\.\d+)", text)
    assert auc and float(auc.group(1)) > 0.88, text
    html = [o.data["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    # the Jupyter progress bar, updated in place to its last epoch
    assert any('<progress value="5" max="5"' in h for h in html)
    assert any("image/png" in o.get("data", {}) for o in outputs)  # plot_history
