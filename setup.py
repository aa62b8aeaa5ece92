"""Only what setup.cfg cannot say: the top-level ``samples/`` folder installed as
``sniffsync/samples`` (package data of a package that lives outside the tree ``find:`` walks).
Everything else is in setup.cfg."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["sniffsync*", "airtime*", "viz*", "web*"]) + ["sniffsync.samples"],
      package_dir={"sniffsync.samples": "samples"})
