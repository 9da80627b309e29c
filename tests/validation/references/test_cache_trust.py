"""What the reference cache trusts and what `zoo cache --clear` deletes (issue 50).

A cache entry is used only when its signed record verifies under the user's key, then the
netCDF file's bytes match the digest that record carries - and only then is the netCDF
file opened. Only genuine damage of an entry is "unreadable" (recomputed); an ImportError,
a MemoryError or a programming error while reading propagates. `zoo cache --clear`
deletes only what the zoo can prove it wrote and says what it kept, and why.
"""
from __future__ import annotations

import ast
import json
import os
import pathlib
import shutil
import warnings

import pytest

import zoo  # noqa: F401  (float64)
from zoo.cli import main as cli_main
from zoo.validation.base import arviz_adapter, signing
from zoo.validation.references import ReferenceConfig, cache, cached_reference, run_reference

CONFIG = ReferenceConfig(num_chains=2, num_warmup=100, num_samples=100, seed=0, max_doublings=0)


# entries signed with a key of this module's own, never the user's (conftest.py)
pytestmark = pytest.mark.usefixtures("private_cache_key")


@pytest.fixture(scope="module")
def problem(normal_means_problem):
    return normal_means_problem


@pytest.fixture(scope="module")
def entry(problem, tmp_path_factory):
    """A real entry: (its folder, the reference run that wrote it)."""
    spec, Phi, y = problem
    folder = tmp_path_factory.mktemp("entry")
    ref = run_reference(spec, Phi, y, config=CONFIG, cache_dir=str(folder))
    return folder, ref


def _copy(folder, dest: pathlib.Path):
    dest.mkdir()
    names = sorted(os.listdir(folder))
    nc = [n for n in names if n.endswith(".nc")]
    js = [n for n in names if n.endswith(".json")]
    assert len(nc) == 1 and len(js) == 1, names
    for n in nc + js:
        shutil.copy(os.path.join(folder, n), dest)
    return dest / nc[0], dest / js[0]


def _rewrite(nc: pathlib.Path, edit) -> None:
    idata = arviz_adapter.from_netcdf(str(nc))
    edit(idata)
    os.remove(nc)
    arviz_adapter.to_netcdf(idata, str(nc))


def _read(problem, folder):
    spec, Phi, y = problem
    return cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(folder))


# --------------------------------------------------------------------------------------
# 1. every byte of the entry is authenticated, before the netCDF file is parsed
# --------------------------------------------------------------------------------------
@pytest.mark.long
def test_the_signed_record_carries_the_netcdf_files_digest(entry, tmp_path):
    folder, _ = entry
    nc, js = _copy(folder, tmp_path / "digest-check")
    record = json.loads(js.read_text(encoding="utf-8"))
    assert cache.CACHE_FORMAT >= 4 and record["cache_format"] == cache.CACHE_FORMAT
    assert record["netcdf_sha256"] == signing.file_sha256(str(nc))
    assert record["netcdf"] == nc.name
    signing.verify_record(record, cache.machine_key(), cache.MAC_DOMAIN)  # the shared machinery


@pytest.mark.parametrize("part", ["design matrix", "sampler name", "labels"])
@pytest.mark.long
def test_an_edited_design_matrix_or_attribute_is_detected(problem, entry, tmp_path, part):
    """The draws and statistics are untouched, so their content digest still matches:
    before issue 50 these entries were used, and the edited design matrix and sampler
    name were copied into the user's reference.nc marked "(from cache)"."""
    folder, _ = entry
    nc, _ = _copy(folder, tmp_path / "e")
    edits = {
        "design matrix": lambda idata: idata.constant_data["Phi"].values.__setitem__((0, 0), 123.0),
        "labels": lambda idata: idata.constant_data["y"].values.__setitem__(0, 1.0 - idata.constant_data["y"].values[0]),
        "sampler name": lambda idata: idata.posterior.attrs.__setitem__("sampler", "a forged sampler"),
    }
    _rewrite(nc, edits[part])
    with pytest.warns(UserWarning, match="ignoring unreadable reference cache entry .*bytes do not match the digest"):
        assert _read(problem, tmp_path / "e") is None


def test_the_netcdf_file_is_not_opened_before_its_digest_is_checked(problem, entry, tmp_path, monkeypatch):
    folder, _ = entry
    nc, js = _copy(folder, tmp_path / "e")
    opened = []
    real = cache.adapter.from_netcdf
    monkeypatch.setattr(cache.adapter, "from_netcdf", lambda path: opened.append(path) or real(path))
    nc.write_bytes(nc.read_bytes()[:2000])  # truncated
    with pytest.warns(UserWarning, match="bytes do not match the digest"):
        assert _read(problem, tmp_path / "e") is None
    assert opened == []
    # an edited record is refused before anything else, too
    shutil.copy(os.path.join(folder, nc.name), nc)
    record = json.loads(js.read_text(encoding="utf-8"))
    record["seconds"] = 0.001
    js.write_text(json.dumps(record), encoding="utf-8")
    with pytest.warns(UserWarning, match="signature does not match"):
        assert _read(problem, tmp_path / "e") is None
    assert opened == []
    # intact: opened once
    shutil.copy(os.path.join(folder, js.name), js)
    assert _read(problem, tmp_path / "e").from_cache and len(opened) == 1


def test_an_entry_of_an_older_format_is_recomputed_with_the_format_as_reason(problem, entry, tmp_path):
    folder, _ = entry
    _, js = _copy(folder, tmp_path / "old")
    record = json.loads(js.read_text(encoding="utf-8"))
    record["cache_format"] = 3
    del record["netcdf_sha256"]
    js.write_text(json.dumps(cache.sign_record(record, cache.machine_key())), encoding="utf-8")
    with pytest.warns(UserWarning, match="outdated reference cache entry .*cache format 3.*format 4"):
        assert _read(problem, tmp_path / "old") is None


# --------------------------------------------------------------------------------------
# 2. only genuine damage is "unreadable"
# --------------------------------------------------------------------------------------
def test_a_garbage_netcdf_signed_for_its_bytes_is_damage(problem, entry, tmp_path):
    """A file whose digest the record vouches for, but that is no netCDF file: the parse
    error is damage (recomputed, one warning)."""
    folder, _ = entry
    nc, js = _copy(folder, tmp_path / "garbage")
    nc.write_bytes(b"not a netCDF file " * 200)
    record = json.loads(js.read_text(encoding="utf-8"))
    record["netcdf_sha256"] = signing.file_sha256(str(nc))
    js.write_text(json.dumps(cache.sign_record(record, cache.machine_key())), encoding="utf-8")
    with pytest.warns(UserWarning, match="ignoring unreadable reference cache entry .*OSError"):
        assert _read(problem, tmp_path / "garbage") is None


@pytest.mark.parametrize("record_text", ['["a list"]', '{"cache_format": 4, "cache_key": 7}', "{not json", "\udcff"])
def test_a_malformed_record_is_damage(problem, entry, tmp_path, record_text):
    folder, _ = entry
    _, js = _copy(folder, tmp_path / "bad")
    js.write_bytes(record_text.encode("utf-8", "surrogateescape"))
    with pytest.warns(UserWarning, match="ignoring (unreadable|untrusted) reference cache entry"):
        assert _read(problem, tmp_path / "bad") is None


@pytest.mark.parametrize("error", [ImportError("a module shadowing h5py"), MemoryError(), KeyboardInterrupt(),
                                   NameError("name 'x' is not defined"), AttributeError("a bug")])
def test_errors_that_are_not_damage_propagate_and_keep_the_entry(problem, entry, tmp_path, monkeypatch, error):
    """Regression: an ImportError raised while reading (a shadowing module) was taken for
    damage - "ignoring unreadable reference cache entry" - and the valid entry was sampled
    again and overwritten."""
    spec, Phi, y = problem
    folder, _ = entry
    nc, js = _copy(folder, tmp_path / "e")
    before = (nc.read_bytes(), js.read_bytes())

    def fails(path):
        raise error

    monkeypatch.setattr(cache.adapter, "from_netcdf", fails)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(type(error)):
            run_reference(spec, Phi, y, config=CONFIG, cache_dir=str(tmp_path / "e"))
    assert (nc.read_bytes(), js.read_bytes()) == before


# --------------------------------------------------------------------------------------
# 3. text files are read and written as UTF-8, whatever the locale
# --------------------------------------------------------------------------------------
def test_every_text_mode_open_of_the_cache_names_its_encoding():
    source = pathlib.Path(cache.__file__).read_text(encoding="utf-8")
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            binary = isinstance(mode, ast.Constant) and "b" in str(mode.value)
            if not binary and not any(k.arg == "encoding" for k in node.keywords):
                missing.append(node.lineno)
    assert not missing, f"open() without encoding= at lines {missing}"


# --------------------------------------------------------------------------------------
# 4. `zoo cache --clear` deletes only what the zoo can prove it wrote
# --------------------------------------------------------------------------------------
def _cache_with_strangers(entry, root: pathlib.Path):
    """A cache folder holding one genuine entry (and its stamped lock) among files the zoo
    did not make, or cannot prove it made; returns (folder, jax folder, {name: kept?} of
    each, for the folder and for jax/)."""
    folder, _ = entry
    cache_dir = root / "cache"
    nc, js = _copy(folder, cache_dir)
    lock = nc.with_suffix(".lock")
    lock.write_text("pid 4242 on somehost since 2025-01-02T03:04:05", encoding="utf-8")
    (cache_dir / f"slice-gibbs-{'b' * 32}.lock").write_bytes(b"")  # an empty lock of a zoo entry name
    hand = {f"nuts-{'a' * 32}.nc": b"x" * 1000, f"nuts-{'a' * 32}.json": b'{"mine": 1}',
            f"nuts-{'c' * 32}.lock": b"my own notes", ".tmp-abc123.nc": b"half", "notes.txt": b"the user's own file",
            f"Bad Name-{'d' * 32}.lock": b""}
    for name, data in hand.items():
        (cache_dir / name).write_bytes(data)
    # an entry signed with another user's key: kept, as is the netCDF file it names
    other = _copy(folder, root / "other")
    record = json.loads(other[1].read_text(encoding="utf-8"))
    record["cache_key"] = "e" * 64
    record["netcdf"] = f"nuts-{'e' * 32}.nc"
    (cache_dir / f"nuts-{'e' * 32}.json").write_text(json.dumps(cache.sign_record(record, b"k" * 32)),
                                                      encoding="utf-8")
    shutil.copy(other[0], cache_dir / f"nuts-{'e' * 32}.nc")
    jax_dir = cache_dir / "jax"
    jax_dir.mkdir()
    jax = {f"jit_fit-{'c' * 64}-cache": False, f"jit_fit-{'c' * 64}-atime": False, "notes.txt": True,
           f"jit_fit-{'c' * 63}-cache": True}
    for name in jax:
        (jax_dir / name).write_bytes(b"y" * 10)
    expect = {nc.name: False, js.name: False, lock.name: False, f"slice-gibbs-{'b' * 32}.lock": False,
              **{name: True for name in hand}, f"nuts-{'e' * 32}.json": True, f"nuts-{'e' * 32}.nc": True}
    return cache_dir, jax_dir, expect, jax


def test_clear_deletes_only_what_the_zoo_can_prove_it_wrote(entry, tmp_path):
    cache_dir, jax_dir, expect, jax_expect = _cache_with_strangers(entry, tmp_path)
    report = cache.clear_cache(str(cache_dir), str(jax_dir))
    assert sorted(n for n in os.listdir(cache_dir) if n != "jax") == sorted(n for n, keep in expect.items() if keep)
    assert sorted(os.listdir(jax_dir)) == sorted(n for n, keep in jax_expect.items() if keep)
    assert report.deleted == 6 and not report.errors
    text = "\n".join(report.lines())
    assert "kept 4 files that are not entries signed with your key" in text, text
    assert "kept 1 temporary file (.tmp-*)" in text, text
    assert "kept 1 lock file that is not the zoo's" in text, text
    assert "kept 4 other files" in text, text  # notes.txt twice, a lock name and a name JAX does not give


def test_a_verified_record_whose_netcdf_was_replaced_keeps_the_netcdf(entry, tmp_path):
    folder, _ = entry
    nc, js = _copy(folder, tmp_path / "c")
    nc.write_bytes(b"someone else's file")
    report = cache.clear_cache(str(tmp_path / "c"))
    assert os.listdir(tmp_path / "c") == [nc.name]
    assert any("bytes do not match" in line for line in report.lines()), report.lines()


def test_a_lock_held_by_a_running_command_is_kept(entry, tmp_path):
    # the zoo's entry locks are fcntl locks; where there is no fcntl (Windows) nothing is locked
    fcntl = pytest.importorskip("fcntl", reason="entry locks use fcntl.flock, which this platform lacks")
    folder, _ = entry
    nc, js = _copy(folder, tmp_path / "c")
    lock = nc.with_suffix(".lock")
    lock.write_bytes(b"")
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        report = cache.clear_cache(str(tmp_path / "c"))
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path / "c")) == sorted([nc.name, js.name, lock.name])
    assert any("in use by a running zoo command" in line for line in report.lines()), report.lines()


def test_zoo_cache_clear_prints_what_it_kept_and_why(entry, tmp_path, monkeypatch, capsys):
    cache_dir, jax_dir, expect, _ = _cache_with_strangers(entry, tmp_path)
    monkeypatch.setenv("ZOO_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("ZOO_JAX_CACHE", raising=False)
    assert cli_main(["cache", "--clear"]) == 0
    out = capsys.readouterr().out
    assert "deleted 6 files" in out
    assert "kept 4 files that are not entries signed with your key" in out
    assert sorted(n for n in os.listdir(cache_dir) if n != "jax") == sorted(n for n, keep in expect.items() if keep)
