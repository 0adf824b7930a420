"""Libraries see a plain eager run (trace/libraries.py): a function a library uses to detect tracing is
replaced while a trace runs, in a module imported before the trace and in one first imported during it
(through the real import system), and restored afterwards."""

import sys

from atenlens.trace.libraries import eager_views_for_libraries

LIBRARY = "def is_tracing():\n    return True\n\n\ndef uses_it():\n    return 'traced' if is_tracing() else 'eager'\n"


def test_a_library_imported_during_the_trace_sees_the_eager_answer(tmp_path, monkeypatch):
    (tmp_path / "lib_imported_later.py").write_text(LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lib_imported_later", raising=False)
    with eager_views_for_libraries([("lib_imported_later", "is_tracing", lambda: False)]):
        import lib_imported_later

        assert lib_imported_later.uses_it() == "eager"
    assert lib_imported_later.uses_it() == "traced"


def test_a_library_imported_before_the_trace_is_patched_at_once(tmp_path, monkeypatch):
    (tmp_path / "lib_imported_before.py").write_text(LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lib_imported_before

    with eager_views_for_libraries([("lib_imported_before", "is_tracing", lambda: False)]):
        assert lib_imported_before.uses_it() == "eager"
    assert lib_imported_before.uses_it() == "traced"
