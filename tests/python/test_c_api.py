"""The C API (demandflight/backend/c_api.h) from Python through ctypes, as a
language with no C++ binding would use it: a fetch against the loopback server
with a callback and a user pointer, its pin, progress of an ended demand, and
errors with their messages."""

import ctypes
import os
import threading
from pathlib import Path

import pytest
from conftest import loopback_server

ROOT = Path(__file__).resolve().parents[2]
LIB = Path(os.environ.get("DFL_BUILD_DIR", ROOT / "build" / "default")) / "backend" / \
    "libdemandflight_c.so"

DFL_OK, DFL_INVALID_ARGUMENT, DFL_NOT_FOUND = 0, 1, 3
DFL_SUCCEEDED = 0


class Artifact(ctypes.Structure):
    _fields_ = [("resource", ctypes.c_char_p), ("revision", ctypes.c_char_p),
                ("target", ctypes.c_char_p), ("generation", ctypes.c_uint32),
                ("origin", ctypes.c_uint32), ("size_bytes", ctypes.c_uint64),
                ("sha256_hex", ctypes.c_char_p)]


class DemandOptions(ctypes.Structure):
    _fields_ = [("owner", ctypes.c_uint32), ("owner_generation", ctypes.c_uint32),
                ("priority", ctypes.c_int32), ("timeout_s", ctypes.c_double)]


class Demand(ctypes.Structure):
    _fields_ = [("slot", ctypes.c_uint32), ("generation", ctypes.c_uint32)]


class Result(ctypes.Structure):
    _fields_ = [("outcome", ctypes.c_int), ("reason", ctypes.c_char_p),
                ("pin", ctypes.c_void_p)]


class Progress(ctypes.Structure):
    _fields_ = [("stage", ctypes.c_int), ("received", ctypes.c_uint64),
                ("expected", ctypes.c_uint64)]


TERMINAL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, Demand, ctypes.POINTER(Result))


def load():
    lib = ctypes.CDLL(str(LIB))
    lib.dfl_last_error.restype = ctypes.c_char_p
    lib.dfl_options_new.restype = ctypes.c_void_p
    lib.dfl_options_free.argtypes = [ctypes.c_void_p]
    for name in ("dfl_options_set_cache_dir", "dfl_options_set_url_template"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.dfl_client_new.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.dfl_client_free.argtypes = [ctypes.c_void_p]
    lib.dfl_subscribe.argtypes = [ctypes.c_void_p, ctypes.POINTER(Artifact),
                                  ctypes.POINTER(DemandOptions), TERMINAL, ctypes.c_void_p,
                                  ctypes.POINTER(Demand)]
    lib.dfl_progress_of.argtypes = [ctypes.c_void_p, Demand, ctypes.POINTER(Progress)]
    lib.dfl_pin_path.argtypes = [ctypes.c_void_p]
    lib.dfl_pin_path.restype = ctypes.c_char_p
    lib.dfl_pin_release.argtypes = [ctypes.c_void_p]
    return lib


@pytest.fixture
def origin(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "a.bin").write_bytes(b"a" * 150_000)
    with loopback_server(www) as url:
        yield url


def test_a_fetch_through_the_c_api_with_ctypes(tmp_path, origin):
    lib = load()
    options = lib.dfl_options_new()
    client = ctypes.c_void_p()
    # Errors: a status and a message naming what is missing.
    assert lib.dfl_client_new(options, ctypes.byref(client)) == DFL_INVALID_ARGUMENT
    assert b"URL template" in lib.dfl_last_error()
    assert lib.dfl_options_set_url_template(options, f"{origin}/{{resource}}".encode()) == DFL_OK
    assert lib.dfl_options_set_cache_dir(options, str(tmp_path / "cache").encode()) == DFL_OK
    assert lib.dfl_client_new(options, ctypes.byref(client)) == DFL_OK, lib.dfl_last_error()
    lib.dfl_options_free(options)

    done = threading.Event()
    seen = {}

    @TERMINAL
    def on_terminal(user, demand, result):
        seen["user"] = user
        seen["outcome"] = result.contents.outcome
        seen["reason"] = result.contents.reason
        if result.contents.pin:
            seen["path"] = lib.dfl_pin_path(result.contents.pin).decode()
            lib.dfl_pin_release(result.contents.pin)
        done.set()

    artifact = Artifact(b"a.bin", b"r1", b"pc", 0, 0, 150_000, None)
    demand = Demand()
    assert lib.dfl_subscribe(client, ctypes.byref(artifact), ctypes.byref(DemandOptions(7, 0, 2, 0)),
                             on_terminal, 1234, ctypes.byref(demand)) == DFL_OK, \
        lib.dfl_last_error()
    assert done.wait(30)
    assert seen["outcome"] == DFL_SUCCEEDED, seen
    assert seen["user"] == 1234  # The user pointer, given back.
    assert Path(seen["path"]).stat().st_size == 150_000
    assert lib.dfl_progress_of(client, demand, ctypes.byref(Progress())) == DFL_NOT_FOUND

    wrong = Artifact(b"a.bin", b"r1", b"pc", 0, 0, 150_000, b"zz")
    assert lib.dfl_subscribe(client, ctypes.byref(wrong), None, on_terminal, None,
                             ctypes.byref(demand)) == DFL_INVALID_ARGUMENT
    assert b"sha256" in lib.dfl_last_error()
    lib.dfl_client_free(client)
