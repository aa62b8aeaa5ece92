"""The PPDU grouping's modules import pandas only where a table is read or built (issue 17:
start-up), checked in a fresh interpreter."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = ("airtime.ppdu", "airtime.extent", "airtime.extent_ba", "airtime.extent_bits", "airtime.framecols",
           "airtime.kinds", "airtime.phy", "airtime.phy_tables")


def test_importing_the_grouping_imports_no_pandas():
    code = "import json, sys\n" + "".join(f"import {m}\n" for m in MODULES) + \
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'airtime'))))"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=True).stdout
    mods = json.loads(out)
    assert set(MODULES) <= set(mods)                    # the probe sees real imports
    assert not [m for m in mods if m.startswith("pandas")]
