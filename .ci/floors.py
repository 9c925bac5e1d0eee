"""Every direct requirement of the installed package at its declared floor.

Run in the environment of the lowest-direct install (``python .ci/floors.py EXTRA,...``): a floor
that is not what got installed is a floor no test ran on (another package needs more).
"""

import sys
from importlib.metadata import PackageNotFoundError, requires, version

from packaging.requirements import Requirement
from packaging.version import Version

extras = sys.argv[1].split(",")
wrong = []
for line in requires("ragas-relevancy-ext") or []:
    requirement = Requirement(line)
    marker = requirement.marker
    if marker is not None and not any(marker.evaluate({"extra": extra}) for extra in extras):
        continue
    for floor in (s.version for s in requirement.specifier if s.operator == ">="):
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            installed = "nothing"
        if installed == "nothing" or Version(installed) != Version(floor):
            wrong.append(f"{requirement.name}: declared >={floor}, installed {installed}")
print("\n".join(wrong) or "every declared floor is the version installed")
sys.exit(1 if wrong else 0)
