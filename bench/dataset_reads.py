"""What reading a dataset file costs a web process, against a reference commit: the run page's prompt on a large
JSONL file (CPU seconds of ``first_training_example`` on a first and a second view, in a fresh process) and the
peak RSS growth of an upload's check (``check_file_dataset``) of three small decompression bombs.

    nice -n 10 .venv/bin/python bench/dataset_reads.py --mb 190 --reference b1d04b3

Each measurement runs in its own process with the code tree on ``sys.path`` first (this checkout's, and the
reference's ``training/`` from ``git archive``); the growth is the peak (VmHWM, reset by /proc/self/clear_refs
after the imports) less the resident memory before the read. The reference reads the bombs whole: a few GB.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PREVIEW = """
import sys, time
sys.path.insert(0, sys.argv[1])
from training.config import TrainConfig
from training.first_prompt import first_training_example
cfg = TrainConfig.from_dict({"task": "file", "data_path": sys.argv[2], "seed": 3, "held_out_fraction": 0.1},
                            check_paths=False)
cpu = []
for _ in range(2):
    start = time.process_time()
    first_training_example(cfg)
    cpu.append(time.process_time() - start)
print(cpu)
"""

READ = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy, pyarrow.compute, pyarrow.parquet
import training.data as data
kib = lambda key: int(open("/proc/self/status").read().split(key + ":")[1].split()[0])
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
base = kib("VmRSS")
try:
    data.check_file_dataset(sys.argv[2])
    verdict = "accepted"
except data.DatasetError as exc:
    verdict = "refused: " + str(exc).split(": ", 1)[-1][:90]
print(repr(((kib("VmHWM") - base) // 1024, verdict)))
"""


def make_files(folder: str, mb: float) -> dict[str, str]:
    """The large JSONL file and the bombs (16 MiB strings: dictionary x 64 rows, plain x 16; one 64 MB line)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = {name: os.path.join(folder, name) for name in ("large.jsonl", "dict.parquet", "plain.parquet", "line.jsonl")}
    pad = "lorem ipsum dolor sit amet " * 10
    with open(files["large.jsonl"], "w") as fh:
        size = i = 0
        while size < mb * 1_000_000:
            line = json.dumps({"prompt": f"question {i}: {pad}", "answer": str(i)}) + "\n"
            fh.write(line)
            size, i = size + len(line), i + 1
    big = "a" * (16 * 1024 * 1024)
    pq.write_table(pa.table({"prompt": [big] * 64, "answer": ["1"] * 64}), files["dict.parquet"], compression="zstd")
    pq.write_table(pa.table({"prompt": [big[:-2] + f"{i:02}" for i in range(16)], "answer": ["1"] * 16}),
                   files["plain.parquet"], compression="zstd", use_dictionary=False)
    with open(files["line.jsonl"], "w") as fh:
        fh.write(json.dumps({"prompt": "a" * 64_000_000, "answer": "1"}) + "\n")
    return files


def run(script: str, tree: str, path: str):
    out = subprocess.run([sys.executable, "-c", script, tree, path], capture_output=True, text=True, timeout=1800)
    if out.returncode:
        return f"error: {out.stderr.strip().splitlines()[-1][:100]}"
    return eval(out.stdout.strip().splitlines()[-1])  # a repr printed by the script above


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20, help="size of the large JSONL file (MB), 1 to 200")
    parser.add_argument("--reference", default="", help="a commit to measure too (e.g. b1d04b3)")
    args = parser.parse_args()
    if not 1 <= args.mb <= 200:
        parser.error("--mb: from 1 to 200")
    with tempfile.TemporaryDirectory() as folder:
        files = make_files(folder, args.mb)
        trees = {"this checkout": ROOT}
        if args.reference:
            ref = os.path.join(folder, "reference")
            os.makedirs(ref)
            archive = subprocess.run(["git", "-C", ROOT, "archive", args.reference, "training"], capture_output=True,
                                     check=True).stdout
            subprocess.run(["tar", "-x", "-C", ref], input=archive, check=True)
            trees[args.reference] = ref
        for label, tree in trees.items():
            cpu = run(PREVIEW, tree, files["large.jsonl"])
            print(f"{label}: prompt preview of a {args.mb:g} MB JSONL: " + (cpu if isinstance(cpu, str) else
                  f"{cpu[0]:.2f} s CPU first view, {cpu[1]:.2f} s second"))
            for name in ("dict.parquet", "plain.parquet", "line.jsonl"):
                read = run(READ, tree, files[name])
                print(f"{label}: {name} ({os.path.getsize(files[name]):,} bytes): " + (read if isinstance(read, str)
                      else f"peak RSS growth {read[0]} MiB, {read[1]}"))


if __name__ == "__main__":
    main()
