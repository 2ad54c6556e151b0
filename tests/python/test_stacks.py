"""Python stacks and the msMemScope API under `memscope run` (exact expectations)."""
import json
import os
import subprocess

from conftest import PYTHON, env, memscope_bin, query, run_cli, script


def py_stack(db, size):
    rows = query(db, "SELECT s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                     "WHERE b.size = ?", size)
    assert len(rows) == 1, "expected one block of %d bytes, got %r" % (size, rows)
    return rows[0][0].split("\n")


def test_known_allocations_have_exact_python_stacks(tmp_path):
    db = run_cli(tmp_path, "alloc_known.py")
    f = script("alloc_known.py")
    # bytearray(n) asks for n + 1 bytes; b"x" * n for n + 33 (the bytes object header).
    assert py_stack(db, 10_000_001) == ["%s(10): inner" % f, "%s(14): outer" % f,
                                        "%s(34): <module>" % f]
    # A thread started after the hook was installed: its stack starts at threading's bootstrap.
    st = py_stack(db, 7_000_001)
    assert st[0] == "%s(18): worker" % f
    assert st[1].endswith("): Thread.run") and "threading.py" in st[1]
    assert py_stack(db, 3_000_001) == ["%s(23): gen" % f, "%s(27): consume" % f,
                                       "%s(39): <module>" % f]
    assert py_stack(db, 5_000_033) == ["%s(31): mul" % f, "%s(40): <module>" % f]
    # The dump view carries the same text.
    rows = query(db, 'SELECT "Call Stack(Python)" FROM memscope_dump WHERE "Event" = \'MALLOC\' '
                     'AND "Attr" LIKE \'%size":"10000001"%\'')
    assert rows and rows[0][0].startswith("%s(10): inner" % f)


def test_python_depth_limit(tmp_path):
    db = run_cli(tmp_path, "alloc_known.py", call_stack="python:2")
    f = script("alloc_known.py")
    assert py_stack(db, 10_000_001) == ["%s(10): inner" % f, "%s(14): outer" % f]


def test_no_python_stacks_without_python_option(tmp_path):
    db = run_cli(tmp_path, "alloc_known.py", call_stack="c:4")
    rows = query(db, "SELECT s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                     "WHERE b.size = 10000001")
    assert rows and rows[0][0] in (None, "")


def test_per_step_leak_is_flagged_with_its_line(tmp_path):
    db = run_cli(tmp_path, "leak_steps.py", call_stack="c:4,python:16")
    f = script("leak_steps.py")
    leak_site = "%s(10): train_step" % f
    # Blocks of >= 50000 bytes made by the script and live at the end of the last step (the
    # interpreter frees them at exit): exactly the 10 kept bytearrays, all at the LEAK line.
    (t_end,) = query(db, "SELECT end_ns FROM steps WHERE step = 10")[0]
    rows = query(db, "SELECT b.size, s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                     "WHERE b.alloc_ns <= ?1 AND (b.free_ns IS NULL OR b.free_ns > ?1) "
                     "AND b.size >= 50000", t_end)
    rows = [r for r in rows if r[1] and r[1].startswith(f + "(")]
    assert sorted(r[0] for r in rows) == [100_001] * 10
    assert all(r[1].split("\n")[0] == leak_site for r in rows)
    # The temporaries were freed.
    assert query(db, "SELECT count(*) FROM blocks WHERE size = 200001 AND free_ns IS NOT NULL")[0][0] == 10
    assert query(db, "SELECT count(*) FROM steps")[0][0] == 11
    # The leaks analysis (step check) flags them; their Python stacks name the line.
    r = subprocess.run([memscope_bin(), "analyze", "leaks", db, "--json"], capture_output=True,
                       text=True)
    if r.returncode == 0:
        d = json.loads(r.stdout)
        ids = [l["allocation_id"] for l in d["step_check"]["leaks"] if l["size"] == 100_001]
        assert len(ids) >= 8  # steps after the warm-up step
        for i in ids:
            (text,) = query(db, "SELECT s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                                "WHERE b.allocation_id = ?", i)[0]
            assert text.split("\n")[0] == leak_site
        assert not [l for l in d["step_check"]["leaks"] if l["size"] == 200_001]


def test_msmemscope_api_under_run(tmp_path):
    db = run_cli(tmp_path, "annotate.py")
    f = script("annotate.py")

    def owner(size):
        rows = query(db, "SELECT o.label FROM blocks b LEFT JOIN owners o ON o.id = b.owner_id "
                         "WHERE b.size = ?", size)
        assert len(rows) == 1
        return rows[0][0]
    assert owner(1_000_002) == "model@encoder"
    assert owner(1_000_003) == "head"
    assert owner(1_000_004) is None
    # RecordFunction: a range around the third allocation.
    rng = query(db, "SELECT name, start_ns, end_ns FROM ranges")
    assert [r[0] for r in rng] == ["forward"]
    (t,) = query(db, "SELECT alloc_ns FROM blocks WHERE size = 1000004")[0]
    assert rng[0][1] <= t <= rng[0][2]
    assert query(db, "SELECT count(*) FROM events WHERE kind = 4")[0][0] == 2
    marks = [r[0] for r in query(db, "SELECT name FROM events WHERE kind = 5 ORDER BY id")]
    assert marks[0] == "describe addr=0x%x owner=kv" % 12345678
    assert marks[1].startswith("snapshot rss=") and marks[1].endswith(" name=after steps")
    # tracer: the two calls, nested.
    tr = query(db, 'SELECT "FuncInfo", depth FROM python_trace ORDER BY "StartTime(ns)"')
    assert ("%s(30): traced_parent" % f, 0) in tr
    assert ("%s(26): traced_child" % f, 1) in tr
    # stop(): nothing after it.
    assert query(db, "SELECT count(*) FROM blocks WHERE size = 1000006")[0][0] == 0


def test_python_started_by_a_shell_gets_its_python_stacks(tmp_path):
    """issue 18 item 10: `memscope run bash run.sh` (msMemScope's recommended form) and `env
    python3 ...`: the Python process started by the launcher gets the stacks it gets when run
    directly (no --call-stack: its Python stack), and the launcher its native ones."""
    f = script("alloc_known.py")
    for name, argv in (("sh", ["/bin/sh", "-c", "exec /usr/bin/python3 %s" % f]),
                       ("env", ["/usr/bin/env", "python3", f])):
        out = str(tmp_path / (name + ".db"))
        r = subprocess.run([memscope_bin(), "run", "-q", "--format=db", "-o", out, "--", *argv],
                           env=env(), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert py_stack(out, 10_000_001) == ["%s(10): inner" % f, "%s(14): outer" % f,
                                             "%s(34): <module>" % f], name
        # the Python process: no native frames (its default), as when run directly
        rows = query(out, "SELECT s.depth FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                          "WHERE b.size = 10000001")
        assert rows == [(0,)], (name, rows)


def _many_functions(cmd):
    # pymalloc (no PYTHONMALLOC=malloc): the RSS as a user's program has it.
    e = env()
    del e["PYTHONMALLOC"]
    r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "%s failed:\n%s\n%s" % (cmd, r.stdout, r.stderr)
    words = r.stdout.split()
    assert words[0] == "alive" and words[4] == "maxrss_kib", r.stdout
    return int(words[1]), int(words[5])


def test_functions_made_at_run_time_are_freed(tmp_path):
    """60,000 functions compiled and dropped (scripts/many_functions.py): under `memscope run`
    (Python stacks: the default for python3) their code objects die as without memscope, the
    max RSS stays within 1.1x the plain run's (issue 47), and the stacks still name each
    function."""
    f = script("many_functions.py")
    alive, rss_plain = _many_functions([PYTHON, f])
    assert alive == 0
    db = str(tmp_path / "run.db")
    alive, rss = _many_functions([memscope_bin(), "run", "-q", "--format=db", "-o", db, "--",
                                  PYTHON, f])
    assert alive == 0, "memscope kept %d of 60 sampled code objects alive" % alive
    # What is left is memscope's fixed cost: about 0.8 MB measured on 10.1 MB (1.08x: the
    # interpreter's tracing code, the agent's code, the package). Before: 78 MB (the code
    # objects kept), then 12.8 MB (the agent's fixed 12 MiB stack table touched at random, its
    # trace chunks resident whole, threading imported).
    assert rss <= 1.1 * rss_plain, \
        "max RSS %d KiB under memscope, %d KiB plain" % (rss, rss_plain)
    rows = query(db, "SELECT s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                     "WHERE b.size = 100001")
    want = ["<made>(3): fn_%d\n%s(25): make\n%s(32): main\n%s(39): <module>" % (i, f, f, f)
            for i in range(0, 60_000, 10_000)]
    assert sorted(r[0] for r in rows) == sorted(want)


def test_forked_child_describes_its_frames_again(tmp_path):
    """scripts/fork_stacks.py: the child's stacks name frames described in the parent (before
    the fork, and on the stack at the fork) and frames first called in the child."""
    db = run_cli(tmp_path, "fork_stacks.py")
    f = script("fork_stacks.py")
    rows = query(db, "SELECT b.size, p.pid, s.py_text FROM blocks b "
                     "JOIN stacks s ON s.id = b.stack_id JOIN processes p ON p.id = b.process_id "
                     "WHERE b.size IN (1000001, 2000001, 3000001) ORDER BY b.size")
    assert len(rows) == 3 and rows[0][1] != rows[1][1] == rows[2][1], rows
    assert [(r[0], r[2].split("\n")) for r in rows] == [
        (1_000_001, ["%s(13): before" % f, "%s(28): <module>" % f]),
        (2_000_001, ["%s(13): before" % f, "%s(21): outer" % f, "%s(29): <module>" % f]),
        (3_000_001, ["%s(18): outer.<locals>.inner" % f, "%s(22): outer" % f,
                     "%s(29): <module>" % f]),
    ]


def _stacks_by_mode(tmp_path, mode):
    """scripts/stacks_modes.py under `memscope run` with the hook of lines mode `mode`: its
    stacks by block size (its sizes only) and how many of its dropped code objects are alive."""
    db = str(tmp_path / ("mode%d.db" % mode))
    cmd = [memscope_bin(), "run", "-q", "--format=db", "--call-stack=c:8,python:32", "-o", db,
           "--", PYTHON, script("stacks_modes.py"), str(mode)]
    r = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "%s failed:\n%s\n%s" % (cmd, r.stdout, r.stderr)
    words = r.stdout.split()
    assert words[0] == "alive", r.stdout
    rows = query(db, "SELECT b.size, s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id "
                     "WHERE b.size BETWEEN 1000001 AND 1900151")
    stacks = {}
    for size, text in rows:
        assert size not in stacks, "two blocks of %d bytes" % size
        stacks[size] = (text or "").split("\n")
    return stacks, int(words[1])


def test_frame_evaluation_hook_gives_exact_stacks(tmp_path):
    """Lines mode 3 (the frame evaluation hook, the pytest plugin's): installed while frames run,
    it gives the stacks the profile hook (mode 2) gives, exact: after frames that returned
    unseen (install(), which installed it) or by an exception, in a generator, in a class's
    __getitem__ that CPython 3.11 starts without the hook, on threads started before and after
    it; and the code objects it met die as without it (issue 47)."""
    f = script("stacks_modes.py")
    stacks, alive = _stacks_by_mode(tmp_path, 3)
    assert alive == 0, "%d of 50 code objects kept alive" % alive
    assert stacks[1_000_001] == ["%s(24): inner" % f, "%s(28): outer" % f, "%s(90): <module>" % f]
    assert stacks[1_100_001] == ["%s(41): catcher" % f, "%s(91): <module>" % f]
    assert stacks[1_200_001] == ["%s(46): gen" % f, "%s(50): drain" % f, "%s(92): <module>" % f]
    for i in range(20):
        assert stacks[1_300_001 + i] == ["%s(55): Box.__getitem__" % f,
                                         "%s(69): use.<locals>.<listcomp>" % f,
                                         "%s(69): use" % f, "%s(93): <module>" % f], i
        assert stacks[1_400_001 + i] == ["%s(61): Box2.__getitem__" % f,
                                         "%s(69): use.<locals>.<listcomp>" % f,
                                         "%s(69): use" % f, "%s(94): <module>" % f], i
    assert stacks[1_500_001] == ["%s(95): <module>" % f]
    for size in (1_600_001, 1_700_001):
        st = stacks[size]
        assert st[:2] == ["%s(78): late" % f, "%s(74): waiter" % f], st
        assert st[2].endswith("): Thread.run") and "threading.py" in st[2], st
    # 150 frames deep (the stacks' innermost 32 frames): frames returning one after another
    # without a call between, those the hook pushed and those it never saw (installed at the
    # bottom of deep_install())
    assert stacks[1_800_001][:3] == ["%s(61): Box2.__getitem__" % f,
                                     "%s(118): deep" % f, "%s(119): deep" % f]
    for n in range(1, 151):
        for size, fn, line, rec in ((1_810_000 + n, "deep", 120, 119),
                                    (1_900_000 + n, "deep_install", 129, 128)):
            want = ["%s(%d): %s" % (f, line, fn)] + ["%s(%d): %s" % (f, rec, fn)] * (150 - n)
            want = (want + ["%s(%d): <module>" % (f, 133 if fn == "deep" else 134)])[:32]
            assert stacks[size + 1] == want, (size, stacks[size + 1])
    assert len(stacks) == 46 + 1 + 300  # the sizes above, no other
    profile, alive = _stacks_by_mode(tmp_path, 2)
    assert alive == 0
    assert profile == stacks
