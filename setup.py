"""Only what setup.cfg cannot say: the top-level ``samples/`` folder installed as
``sniffsync/samples`` (package data of a package that lives outside the tree ``find:`` walks),
and the optional C record walk, header passes and the merge's packet copy (``sniffsync.io._walk``,
five sources: when it cannot be compiled, the install goes on and uses its Python walk,
decoders and copy, see ``sniffsync/io/walk.py``).
Everything else is in setup.cfg."""
from setuptools import Extension, find_packages, setup

setup(packages=find_packages(include=["sniffsync*", "airtime*", "viz*", "web*"]) + ["sniffsync.samples"],
      package_dir={"sniffsync.samples": "samples"},
      ext_modules=[Extension("sniffsync.io._walk",
                             [f"sniffsync/io/{name}.c" for name in ("_walk", "_l3", "_dot11", "_rtphy", "_pieces")],
                             depends=["sniffsync/io/_passes.h"], optional=True, extra_compile_args=["-O2"])])
