"""The runner and the front ends never load torch (``import torch`` loads ``torch.cuda``, and a
process that touched CUDA must not start cells); the engine never imports the UI."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUNNER_SIDE = ["engine.runner.supervisor", "engine.cell.protocol", "engine.processes",
               "engine.executors.ray.options", "engine.define.experiment", "engine.define.workloads",
               "engine.define.watchdog_settings", "engine.registry", "engine.workloads", "engine.define.campaign", "engine.define.matrix", "engine.results.store",
               "engine.results.columns", "engine.results.columns_doc", "engine.results.values",
               "engine.results.read",
               "engine.results.paths", "engine.results.preflight", "engine.results.load",
               "engine.define.catalogue", "engine.events", "engine.measure.provenance", "engine.results.rows",
               "engine.plugins", "engine.define.availability", "engine.runner.cellproc", "engine.runner.watchdog",
               "engine.runner.control", "engine.observe.follow", "engine.observe.state", "engine.define.validate",
               "engine.results.analysis", "fugue_tui.cli", "fugue_tui.console.batch", "fugue_tui.commands.listing",
               "fugue_tui.report.tables", "fugue_tui.report.charts", "fugue_tui.commands.validate",
               "fugue_tui.commands.prefetch", "fugue_tui.commands.run", "fugue_tui.commands.run_flags",
               "engine.define.adhoc", "fugue_tui.console.live", "fugue_tui.live.progress_math", "fugue_tui.format",
               "fugue_tui.console.plain", "fugue_tui.console.dry_run", "fugue_tui.live.event_text",
               "fugue_tui.live.view", "fugue_tui.live.job_table", "fugue_tui.live.styles",
               "fugue_tui.report.figures", "engine.measure.monitor", "engine.cell.sidecar",
               "engine.measure.nvml", "engine.measure.host", "engine.measure.energy",
               "engine.measure.samples", "engine.cleanup", "engine.measure.spans",
               "engine.define.axes", "engine.executors.mp.mps", "engine.executors.mp.mps_checks",
               "engine.executors.ray.runtime", "engine.define.executor_options",
               "engine.executors.docs", "engine.define.campaign_schema", "engine.define.campaign_docs",
               "engine.define.campaign_options", "engine.selfcheck.verdict",
               "engine.selfcheck.cases", "engine.selfcheck.store", "fugue_tui.commands.selfcheck"]


def test_runner_side_modules_do_not_import_torch():
    code = (
        "import importlib, json, sys\n"
        f"for name in {RUNNER_SIDE!r}: importlib.import_module(name)\n"
        "from engine.plugins import load_plugins; load_plugins()\n"
        "from engine.define.campaign import load_campaign\n"
        "from engine.runner.supervisor import Runner\n"
        "Runner(load_campaign('campaigns/quick.toml'))\n"
        "heavy = ('torch', 'torchvision', 'sklearn', 'textual', 'ray')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_engine_never_imports_ui_libraries():
    offenders = []
    for path in (ROOT / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in ("textual", "rich", "plotext", "fugue_tui"):
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


DASHBOARD = ["fugue_tui.app", "fugue_tui.app.app", "fugue_tui.app.actions",
             "fugue_tui.app.messages", "fugue_tui.app.models.plan", "fugue_tui.app.process",
             "fugue_tui.app.models.series", "fugue_tui.app.screens.plan", "fugue_tui.app.screens.run",
             "fugue_tui.app.screens.modals", "fugue_tui.app.widgets.catalogue_tree",
             "fugue_tui.app.widgets.cell_table", "fugue_tui.app.widgets.job_progress",
             "fugue_tui.app.widgets.device_charts", "fugue_tui.app.widgets.log_pane"]


def test_dashboard_never_imports_torch():
    """The dashboard process lists the catalogue, previews a plan (the runner's dry run) and
    draws charts without loading torch, scikit-learn or ray."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {DASHBOARD!r}: importlib.import_module(name)\n"
        "from fugue_tui.app.screens.plan import experiment_infos\n"
        "from fugue_tui.app.models.plan import default_doc, preview\n"
        "assert experiment_infos(None)\n"
        "assert preview({**default_doc(), 'experiments': ['D_ens']}).cells\n"
        "from fugue_tui.report.charts import metric_panels\n"
        "metric_panels([0, 1], [('cpu', [1, 2])])\n"
        "heavy = ('torch', 'torchvision', 'sklearn', 'ray')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
