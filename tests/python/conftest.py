import os
import sys

# The package is imported from the build tree (PYTHONPATH=build/python, set by CTest).
build = os.environ.get("ATTNPHYS_BUILD_DIR")
if build:
    sys.path.insert(0, os.path.join(build, "python"))
