"""memscope's public API without the agent: argument checking (msMemScope's exceptions and
messages), config rules, stop before start, the CRC-64 variant, no-op annotations."""
import warnings

import pytest

import memscope
import memscope as msmemscope
from memscope import _config, _native, describe

FAILED = "Set msmemscope trace config failed!"


@pytest.fixture(autouse=True)
def fresh_config():
    _config.current = dict(_config.DEFAULTS)
    _config._set_once.clear()
    yield


def test_config_needs_keywords():
    with pytest.raises(ValueError, match=FAILED):
        msmemscope.config()
    with pytest.raises(TypeError):
        msmemscope.config("db")


@pytest.mark.parametrize("kw", [dict(level=1), dict(call_stack=None), dict(output_path=b"x"),
                                dict(events=["alloc"])])
def test_config_values_must_be_str(kw):
    with pytest.raises(TypeError, match="must be a str"):
        msmemscope.config(**kw)


@pytest.mark.parametrize("kw,why", [
    (dict(bogus="1"), "unknown key 'bogus'"),
    (dict(device="gpu"), "device"),
    (dict(device="npu:32"), "device"),
    (dict(level="warp"), "level"),
    (dict(events="alloc,bogus"), "events"),
    (dict(call_stack="c:1001"), "call_stack"),
    (dict(call_stack="java:3"), "call_stack"),
    (dict(call_stack="c:x"), "call_stack"),
    (dict(analysis="leaks,nope"), "analysis"),
    (dict(analysis="oom:0"), "oom"),
    (dict(watch="start"), "watch"),
    (dict(watch="a,b,half-content"), "full-content"),
    (dict(format="xml"), "format"),
    (dict(data_format="xml"), "format"),
    (dict(output_path=""), "output_path"),
    (dict(format="db", data_format="csv"), "twice"),
])
def test_config_bad_values(kw, why):
    with pytest.raises(ValueError) as e:
        msmemscope.config(**kw)
    assert str(e.value).startswith(FAILED)
    assert why in str(e.value)


def test_config_good_values_and_aliases():
    c = msmemscope.config(device="npu:0,cpu", level="op", events="alloc,free,access",
                          call_stack="c:16,python:8", analysis="leaks,oom:5",
                          watch="op.a:0,op.b,full-content", data_format="csv",
                          output="out_dir")
    assert c["format"] == "csv" and c["output_path"] == "out_dir"
    assert _config.parse_call_stack(c["call_stack"]) == (16, 8)
    assert _config.parse_watch(c["watch"]) == ("op.a", 0, "op.b", True)
    assert _config.parse_watch("aten::add:1,aten::mul") == ("aten::add", 1, "aten::mul", False)
    # full-width comma, as the CLI
    assert _config.parse_call_stack("c:3\uff0cpython:4") == (3, 4)


def test_config_rebuilds_from_defaults_and_keeps_once_keys():
    msmemscope.config(output_path="a.db", call_stack="python:5")
    c = msmemscope.config(level="kernel")
    assert c["call_stack"] == _config.DEFAULTS["call_stack"]  # reverted
    assert c["output_path"] == "a.db"                        # kept
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = msmemscope.config(output_path="b.db", format="csv")
    assert c["output_path"] == "a.db" and c["format"] == "csv"
    assert any("only once" in str(x.message) for x in w)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        msmemscope.config(format="db")
    assert any("format can be set only once" in str(x.message) for x in w)


def test_stop_before_start():
    assert not memscope._state["started"]
    with pytest.raises(RuntimeError, match="before memscope.start"):
        msmemscope.stop()


def test_no_agent_annotations_are_noops():
    assert not _native.preloaded()
    assert msmemscope.mode() == "none"
    assert _native.available() is False
    assert _native.mark("x") is False
    msmemscope.step()
    with describe.describer(owner="x"):
        pass
    with msmemscope.RecordFunction("r"):
        pass
    st = msmemscope.take_snapshot()
    assert st["allocated"] > 0 and st["rss"] > 0 and st["name"] == "Memory Snapshot"


def _crc64_ref(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x42F0E1EBA9EA3693 if c & 1 else c >> 1
        table.append(c)
    c = (1 << 64) - 1
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ ((1 << 64) - 1)


def test_crc64_variant():
    import ctypes
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert _native.crc64(data) == _crc64_ref(data)
        buf = ctypes.create_string_buffer(data, len(data))
        assert _native.crc64(ctypes.addressof(buf), len(data)) == _crc64_ref(data)
        assert _native.read_bytes(ctypes.addressof(buf), len(data)) == data
    # Not CRC-64/XZ (whose check value for "123456789" is 0x995DC9BBDF1939FA).
    assert _native.crc64(b"123456789") != 0x995DC9BBDF1939FA
    # Golden value of this variant (init/xorout all ones, right shift, non-reflected poly).
    assert _native.crc64(b"123456789") == 0xB86883E6FA710A9F


def test_describer_bad_input():
    with pytest.raises(TypeError):
        describe.describer(owner=3)
    with pytest.raises(TypeError):
        describe.describer()
    with pytest.raises(ValueError):
        describe.describer(owner="a@b")
    with pytest.raises(ValueError):
        describe.describer(owner="x" * 129)
    with pytest.raises(TypeError):
        describe.describer(1, 2, owner="x")
    with pytest.raises(TypeError):
        describe.describer("not a tensor", owner="x")
    with pytest.raises(TypeError):
        with describe.describer(4096, owner="x"):
            pass


def test_describer_depth_limit_warns():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with describe.describer(owner="a"), describe.describer(owner="b"), \
                describe.describer(owner="c"), describe.describer(owner="d"):
            pass
    assert any("'d' is dropped" in str(x.message) for x in w)
    assert describe._tls.depth == 0


def test_record_function_and_snapshot_bad_input():
    with pytest.raises(TypeError):
        msmemscope.RecordFunction(3)
    with pytest.raises(ValueError):
        msmemscope.RecordFunction("")
    with pytest.raises(TypeError):
        msmemscope.take_snapshot(device_mask="0")
    with pytest.raises(TypeError):
        msmemscope.take_snapshot(device_mask=[0, -1])
    with pytest.raises(TypeError):
        msmemscope.take_snapshot(name=5)

    @msmemscope.RecordFunction("f")
    def f(x):
        return x + 1
    assert f(1) == 2
    with msmemscope.TakeSnapshot(device_mask=(0, 1), name="s"):
        pass


def test_watch_on_non_tensor():
    try:
        from memscope import watcher
    except ImportError:
        pytest.skip("memscope.watcher (the torch layer) is not there")
    with pytest.raises(TypeError):
        watcher.watch("not a tensor", name="w")
    with pytest.raises(TypeError):
        watcher.watch([1, 2, 3], name="w")
