import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

DATA = Path(__file__).parent / "data"
CAPTURES = DATA / "captures"


@pytest.fixture
def captures():
    return CAPTURES


def pytest_collection_modifyitems(config, items):
    # tshark-marked tests need the binary; CI installs it (.ci/run), so there they must run
    import os
    if shutil.which("tshark") is None and not os.environ.get("CI"):
        skip = pytest.mark.skip(reason="tshark not installed (CI installs it)")
        for item in items:
            if "tshark" in item.keywords:
                item.add_marker(skip)
