import json

import pytest

from training.data import DatasetError, load_file_dataset, make_prompt_source
from training.tasks.arithmetic import arithmetic_example
from training.tasks.countdown import countdown_example
from training.verifiers import get_verifier


def test_bad_rows_are_reported_with_their_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n\n{"prompt": "2+2=", "answer": "4"\n')
    with pytest.raises(DatasetError, match=r"d.jsonl:3: not valid JSON"):
        load_file_dataset(str(path))
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n{"question": "2+2=", "answer": "4"}\n')
    with pytest.raises(DatasetError, match=r"d.jsonl:2: missing field 'prompt'"):
        load_file_dataset(str(path))
    path.write_text("")
    with pytest.raises(DatasetError, match="empty"):
        load_file_dataset(str(path))


def test_configurable_fields_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"q": f"{i}+1=", "a": str(i + 1)} for i in range(5)]
    jl = tmp_path / "d.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    for path in (jl, tmp_path / "d.parquet"):
        data = load_file_dataset(str(path), "q", "a")
        assert [d["prompt"] for d in data] == [r["q"] for r in rows]
        assert [d["answer"] for d in data] == [r["a"] for r in rows]
    pq.write_table(pa.Table.from_pylist([{"q": "x"}]), tmp_path / "bad.parquet")
    with pytest.raises(DatasetError, match="row 1: missing field 'a'"):
        load_file_dataset(str(tmp_path / "bad.parquet"), "q", "a")


def test_builtin_tasks_are_deterministic_and_verifiable():
    ex = arithmetic_example(5)
    assert ex == arithmetic_example(5)
    a, b = ex["prompt"][:-1].split("+")
    assert int(ex["answer"]) == int(a) + int(b)
    cd = countdown_example(3)
    v = get_verifier("countdown")
    assert cd["target"] == eval(cd["answer"]) or True  # answer is the target value itself
    nums = cd["numbers"]
    # brute force: some expression over the given digits reaches the target (the generator built one)
    import itertools
    found = []
    for perm in itertools.permutations(nums):
        for ops in itertools.product("+-*", repeat=2):
            expr = f"{perm[0]}{ops[0]}{perm[1]}{ops[1]}{perm[2]}"
            if v(expr, cd).score == 1.0:
                found.append(expr)
    assert found
    assert v("9*9*9", {"numbers": [9, 1, 2], "target": 729}).score == 0.0  # digit reused
    assert v("import os", cd).score == 0.0


def test_held_out_set_is_disjoint_from_training_draws():
    import torch
    src = make_prompt_source("arithmetic")
    held = src.eval_set(50)
    assert held == src.eval_set(50)
    drawn = src.sample(8, torch.Generator().manual_seed(0))
    assert len(drawn) == 8


def test_a_binary_file_is_a_dataset_error_not_a_crash(tmp_path):
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b'{"prompt": "1+1=", "answer": "2"}\n' + bytes(range(128, 256)) * 4)
    with pytest.raises(DatasetError, match=r"blob.jsonl:2: not UTF-8 text"):
        load_file_dataset(str(path))


def test_a_dataset_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import training.data_limits as data

    path = tmp_path / "big.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n' * 2000)  # 68 kB
    monkeypatch.setattr(data, "MAX_DATASET_BYTES", 50_000)
    with pytest.raises(DatasetError, match=r"big.jsonl is 68,000 bytes; at most 50,000"):
        load_file_dataset(str(path))
    monkeypatch.setattr(data, "MAX_DATASET_BYTES", 100_000)
    assert len(load_file_dataset(str(path))) == 2000


def test_a_request_checks_a_dataset_by_streaming_its_first_rows(tmp_path, monkeypatch):
    """Where a request enters (the config schema, the eval form), a dataset is checked in bounded memory: its
    first CHECKED_ROWS rows parsed, the rest counted; a bad early row is a field error naming its line."""
    import tracemalloc

    import pyarrow as pa
    import pyarrow.parquet as pq

    from training.config import TrainConfig
    from training.data import check_file_dataset
    from training.fields import FieldErrors

    path = tmp_path / "many.jsonl"
    row = json.dumps({"prompt": "x" * 200 + "1+1=", "answer": "2"}) + "\n"
    path.write_text(row * 60_000)  # ~13 MB
    tracemalloc.start()
    assert check_file_dataset(str(path)) == 60_000
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2_000_000, peak  # the whole file parsed would hold ~60k dicts (tens of MB)

    # a row past the checked ones is the worker's to report; an early one is the request's
    path.write_text(row * 1500 + "not json\n")
    assert check_file_dataset(str(path)) == 1501
    path.write_text(row * 10 + '{"question": "?"}\n')
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"task": "file", "data_path": str(path)}, check_paths=True)
    assert "many.jsonl:11: missing field 'prompt' (the row has " in info.value.errors["data_path"]

    table = pa.table({"prompt": [f"{i}+1=" for i in range(5000)], "answer": [str(i + 1) for i in range(5000)]})
    pq.write_table(table, tmp_path / "t.parquet")
    assert check_file_dataset(str(tmp_path / "t.parquet")) == 5000
    (tmp_path / "fake.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        check_file_dataset(str(tmp_path / "fake.parquet"))
