#!/usr/bin/env python3
"""Checks that no folder of runner/ includes a header of a folder on a higher floor.

  scripts/check_floors.py [SOURCE_DIR]

runner/'s folders stand on floors, lowest first (docs/layout.md says what each holds). A file
may include headers of its own folder and of folders on lower floors; never one of a higher
floor, nor one of another folder on its own floor. cli/ is the top: the commands and main.cc,
the composition root, which may use everything. A folder of runner/ missing from FLOORS is an
error too: a new folder gets its floor here. Prints each offending include; exit status 1 when
there is one.
"""
import pathlib
import re
import sys

FLOORS = [
    ["job"],                                   # the rank job: world, metadata, GPU, MPI, launcher
    ["backends"],                              # the ways of allreducing, on a job's world
    ["cluster", "infer", "migrate", "remote"], # the emulated cluster, inference, migration, devices
    ["record"],                                # raw.jsonl's format: points, axes, fields
    ["analysis"],                              # a run read back: records, statistics, text, plots
    ["predict"],                               # the cost model, its checks and what-ifs
    ["report"],                                # report.md, summary.csv, compare
    ["sweep"],                                 # configs, the driver, where points run
    ["tune"],                                  # `ringbench tune`: sweeps and predictions
    ["cli"],                                   # the commands and main.cc: the top
]

INCLUDE = re.compile(r'^\s*#\s*include\s*"runner/([^/"]+)/')


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    runner = root / "runner"
    floor = {folder: level for level, folders in enumerate(FLOORS) for folder in folders}
    problems = []
    for d in sorted(p for p in runner.iterdir() if p.is_dir()):
        if d.name not in floor:
            problems.append(f"runner/{d.name}/: on no floor: add it to FLOORS in scripts/check_floors.py "
                            "and to docs/layout.md")
    for path in sorted(runner.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu", ".cuh") or not path.is_file():
            continue
        folder = path.relative_to(runner).parts[0]
        if folder not in floor:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) == folder:
                continue
            to = m.group(1)
            if to not in floor:
                problems.append(f"{path.relative_to(root)}:{n}: includes runner/{to}/, a folder on no floor")
            elif floor[to] >= floor[folder]:
                where = "a higher floor" if floor[to] > floor[folder] else "its own floor"
                problems.append(f"{path.relative_to(root)}:{n}: runner/{folder}/ includes runner/{to}/, on {where}: "
                                f"{line.strip()}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_floors: {len(problems)} include(s) against runner/'s floors (docs/layout.md)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
