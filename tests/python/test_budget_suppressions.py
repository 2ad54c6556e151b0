"""memscope run --fail-on-leak with LeakSanitizer-style suppressions on a Python program
(docs/ci.md): a pattern matches a Python frame's function or file, as it matches native
frames. scripts/keep_native.py keeps 5 MiB (5242880 bytes, one block) from keep_forever()."""
import re
import subprocess

from conftest import PYTHON, env, memscope_bin, script


def run(tmp_path, *args):
    r = subprocess.run([memscope_bin(), "run", "-o", str(tmp_path / "k.db"), *args, "--",
                        PYTHON, script("keep_native.py")], env=env(), capture_output=True,
                       text=True, timeout=300)
    return r.returncode, r.stderr


def test_python_frames_suppressed(tmp_path):
    rc, err = run(tmp_path, "--fail-on-leak=4MiB")
    assert rc == 23, err
    assert re.search(r"memscope:   5242880 bytes in 1 block: keep_forever \(.*keep_native.py:10\)",
                     err), err
    (tmp_path / "by_function").write_text("# the function\nleak:keep_forever\n")
    rc, err = run(tmp_path, "--fail-on-leak=4MiB",
                  "--suppressions=" + str(tmp_path / "by_function"))
    assert rc == 0, err
    assert "memscope:   (5242880 bytes in 1 block suppressed)" in err
    assert "matched 5242880 bytes in 1 block\n" in err
    (tmp_path / "by_file").write_text("leak:*/keep_native.py$\n")
    rc, err = run(tmp_path, "--fail-on-leak=4MiB", "--suppressions=" + str(tmp_path / "by_file"))
    assert rc == 0, err
    assert re.search(r"suppression leak:\*/keep_native.py\$ .* matched [0-9]+ bytes", err), err
