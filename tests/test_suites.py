"""Suites: the built-in health suite checks against the registry, and every bad suite is refused before any GPU
work with the file and line of the problem."""

import pytest

from gpu.core import stats
from gpu.experiments import request, suites


def test_the_health_suite_lists_the_figures_a_fleet_review_needs():
    suite = suites.load("health")
    assert suite.title == "Fleet health" and suite.name == "health"
    assert set(suite.experiments) == {"transfers", "coalescing", "host_latency", "reduction", "occupancy", "peers"}
    transfers = suite.run_for("transfers").points()
    # pinned and pageable, both directions, 1 MiB and 256 MiB, both timing methods
    assert {(p[0], p[1], p[2]) for p in transfers} == {
        (size, mode, d) for size in (1 << 20, 256 << 20) for mode in ("pageable", "pinned") for d in ("h2d", "d2h")}
    assert {p[4] for p in transfers} >= {"cuda_event", "cuda_event_batched_held"}  # single and batched
    # the HBM copies and stride-64 reads
    assert set(suite.run_for("coalescing").points()) == {
        ("memcpy_dtod", 256, 1 << 26, None, None, None), ("copy_f32", 256, 1 << 26, None, None, None),
        ("copy_f4", 256, 1 << 26, None, None, None), ("strided", 256, 1 << 26, 64, None, None)}
    assert len(suite.run_for("reduction").points()) == 1 and len(suite.run_for("occupancy").points()) == 1
    for run in suite.gpu_runs:  # every run passes the registry's own checks, with the suite's profile
        assert request.check_params(run.experiment, run.params, None) == []
        assert run.params["profile"] == "precise/timeout_s=1,hot_max_noise=1" and run.timeout_s == 120
    [peers] = suite.node_runs  # the node's GPUs together, with the peer experiment's own checks
    assert peers.experiment == "peers" and request.check_params("peers", peers.params, None) == []
    assert peers.params["profile"] == "interactive" and peers.timeout_s == 600


def test_the_health_suites_links_are_the_peers_pages_first_matrix():
    """The suite's node run asks for what the Peers page's live Measure asks for by default (pages/peers.py
    ``peer_request``: the declaration's defaults, profile included), so the two measure the same matrix the same way.
    The suite's precise profile on every link point made a 4-GPU node's links take 68 s against the page's 12 s."""
    from gpu.experiments import peers as declared_peers
    from gpu.experiments import registry

    page_request = {axis.name: axis.default for axis in registry.BY_NAME["peers"].arguments}
    suite_request = suites.load("health").run_for("peers").checked().params
    assert suite_request == declared_peers.parse_params(page_request)
    assert suite_request.profile == "interactive" and suite_request.sizes == [declared_peers.MATRIX_SIZE]
    assert suite_request.variants == list(declared_peers.MATRIX_VARIANTS) and suite_request.methods == ["batched"]


@pytest.mark.parametrize(("text", "expected"), [
    ("a = [", "x.toml: line 1: not valid TOML"),
    ('title = "t"\n\n[[run]]\nexperiment = "transfer"\n', "x.toml: line 4: unknown experiment 'transfer'"),
    ('[[run]]\nexperiment = "transfers"\n[run.params]\nsizes = [1024]\nmodez = ["pinned"]\n',
     "x.toml: line 5: transfers: unknown parameter: modez"),
    ('[[run]]\nexperiment = "transfers"\n[run.params]\nmodes = ["pinned"]\nsizes = [0]\n',
     "x.toml: line 5: transfers: size 0 B must be at least 16 B"),
    ('profile = "fastest"\n[[run]]\nexperiment = "reduction"\n', "x.toml: line 3: reduction: unknown profile"),
    ('timeout_s = -1\n[[run]]\nexperiment = "reduction"\n', "x.toml: line 1: timeout_s must be a positive"),
    ('[[run]]\nexperiment = "reduction"\n[[run]]\nexperiment = "reduction"\n',
     "x.toml: line 3: reduction is listed 2 times (lines 1, 3)"),
    ('colour = "red"\n[[run]]\nexperiment = "reduction"\n', "x.toml: line 1: unknown key 'colour'"),
    ('title = "empty"\n', "x.toml: line 1: a suite lists at least one [[run]]"),
])
def test_a_bad_suite_is_refused_with_its_line(text, expected):
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    assert any(reason.startswith(expected) for reason in caught.value.reasons), caught.value.reasons


def test_an_unknown_suite_name_lists_the_built_in_ones(tmp_path):
    with pytest.raises(suites.SuiteError, match=r"no suite 'nightly'.*\(health, roofline\)"):
        suites.load("nightly")
    with pytest.raises(suites.SuiteError, match="cannot read the suite"):
        suites.load(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize("named", ["/dev/zero", "/dev/null", "/tmp"])
def test_a_suite_that_is_not_a_regular_file_is_refused_unread(named):
    with pytest.raises(suites.SuiteError, match=f"{named}: not a regular file"):
        suites.load(named)


def test_a_suite_file_over_one_megabyte_is_refused_after_reading_one(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * suites.MAX_SUITE_BYTES + '\n[[run]]\nexperiment = "reduction"\n')
    with pytest.raises(suites.SuiteError, match="big.toml: larger than 1,000,000 bytes"):
        suites.load(str(path))


def test_a_stored_fleet_reads_its_suite_from_its_text_or_a_built_in_name_only():
    text = '[[run]]\nexperiment = "reduction"\n'
    suite = suites.stored("f1", "mine", text)
    assert suite.name == "mine" and suite.experiments == ("reduction",) and suite.text == text
    assert suites.stored("f1", "health", None).title == "Fleet health"  # an older store: a built-in name
    for name in ("/etc/passwd", "quick", "../health", "health.toml", None):
        with pytest.raises(suites.SuiteError, match="keeps only its name") as caught:
            suites.stored("f1", name, None)
        assert len(caught.value.reasons) == 1


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000, "a = " + "{b = " * 3000 + "1" + "}" * 3000,
                                  "[[run]]\nexperiment = \"reduction\"\n[run.params]\nx = " + "[" * 9 + "]" * 9])
def test_a_deeply_nested_suite_is_refused_in_one_line_before_parsing(text):
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    [reason] = caught.value.reasons
    assert "nested deeper than 8 levels" in reason and reason.startswith("x.toml: line ")


@pytest.mark.parametrize("text", [
    '[[run]]\nexperiment = "reduction"\n[run.params]\n' + ".".join(f"k{i}" for i in range(1000)) + " = 1\n",
    '[[run]]\nexperiment = "reduction"\n[run.params.' + ".".join(f"k{i}" for i in range(1000)) + "]\n",
    '[[run]]\nexperiment = "reduction"\nparams = { ' + ".".join(f'"k{i}"' for i in range(20000)) + " = 1 }\n",
])
def test_a_dotted_key_of_a_thousand_parts_is_refused_in_one_line_before_any_recursion(text):
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    [reason] = caught.value.reasons
    assert reason.startswith("x.toml: line ") and "keys nested deeper than 8 levels" in reason
    with pytest.raises(suites.SuiteError, match="keys nested deeper than 8 levels"):
        suites.stored("f1", "mine", text)  # a fleet's kept suite, read again on resume


def test_the_key_lines_of_a_very_dotted_key_are_found_without_recursion():
    from gpu.core.toml_lines import KeyLines

    keys = [f"k{i}" for i in range(3000)]
    lines = KeyLines("\n" + ".".join(keys) + " = 1\n")
    assert lines.get(*keys) == 2 and lines.get("k0") == 2


def test_brackets_in_strings_and_comments_do_not_count_as_nesting():
    text = ('title = "[[[[[[[[[[{{{{{{{{{{"  # ]]]]]]]]]] [[[[[[[[[[\n'
            "profile = 'precise/timeout_s=1' # '[[[[[[[[[[\n"
            '[[run]]\nexperiment = "reduction"\n')
    assert suites.parse(text, "x.toml").title.startswith("[[[[")


def test_a_large_suite_is_refused_by_its_size_and_count_of_runs_in_one_line():
    import time

    many = '[[run]]\nexperiment = "reduction"\n' * 20_000  # 660 kB
    started = time.monotonic()
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(many, "x.toml")
    assert time.monotonic() - started < 1.0
    assert caught.value.reasons == ["x.toml: 20,000 [[run]] tables, over the limit of 100 (one per experiment)"]
    with pytest.raises(suites.SuiteError, match="larger than 1,000,000 characters"):
        suites.parse("# " + "x" * 2_000_000 + "\n", "x.toml")


def test_an_experiment_listed_many_times_is_named_once_with_its_lines():
    text = '[[run]]\nexperiment = "reduction"\n' * 50
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    [reason] = caught.value.reasons
    assert reason.startswith("x.toml: line 3: reduction is listed 50 times (lines 1, 3, 5, 7, 9, 11, 13, 15, 17, 19 …)")


@pytest.mark.parametrize(("text", "expected"), [
    ('timeout_s = 1000000000000\n[[run]]\nexperiment = "reduction"\n',
     "x.toml: line 1: timeout_s must be a positive number of seconds, at most 86,400 (a day), not 1000000000000"),
    ('[[run]]\nexperiment = "reduction"\ntimeout_s = 1e400\n', "x.toml: line 3: timeout_s must be a positive"),
    ('[[run]]\nexperiment = "reduction"\ntimeout_s = true\n', "x.toml: line 3: timeout_s must be a positive"),
    ('profile = "precise/timeout_s=1e400"\n[[run]]\nexperiment = "reduction"\n',
     "x.toml: line 3: reduction: profile 'precise/timeout_s=1e400': timeout_s must be a finite number of at most"),
    ('profile = "precise/timeout_s=inf"\n[[run]]\nexperiment = "reduction"\n', "timeout_s must be a finite number"),
    ('profile = "precise/timeout_s=nan"\n[[run]]\nexperiment = "reduction"\n', "timeout_s must be a finite number"),
    ('profile = "precise/max_samples=1e300"\n[[run]]\nexperiment = "reduction"\n', "max_samples must be a finite"),
    ('profile = "precise/timeout_s=1,hot_max_noise=2"\n[[run]]\nexperiment = "reduction"\n',
     "x.toml: line 3: reduction: profile 'precise/timeout_s=1,hot_max_noise=2': hot_max_noise must be a finite number "
     "of at most 1, not 2"),
    ('title = {a = 1}\n[[run]]\nexperiment = "reduction"\n', "x.toml: line 1: title must be text, not {'a': 1}"),
    ('[[run]]\nexperiment = "reduction"\nprofile = 3\n', "x.toml: line 3: profile must be text"),
    ('[[run]]\nexperiment = "reduction"\ncolour = "red"\n', "x.toml: line 3: unknown key 'colour' in a run"),
])
def test_every_setting_has_a_range_and_a_type_refused_with_its_line(text, expected):
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    assert any(expected in reason for reason in caught.value.reasons), caught.value.reasons


# Layouts where a key's line is not found by looking at the start of each line: quoted and dotted keys, inline
# tables (a multi-line array inside one), a [run.params] sub-table after the run's own key of the same name, and
# [[run]] or `key =` inside comments, multi-line strings and arrays.
@pytest.mark.parametrize(("text", "expected"), [
    ('"title" = "t"\n[[run]]\n"experiment" = \'transfer\'\n', "x.toml: line 3: unknown experiment 'transfer'"),
    ("'timeout_s' = -1\n[[run]]\nexperiment = \"reduction\"\n", "x.toml: line 1: timeout_s must be a positive"),
    ('[[run]]\nexperiment = "transfers"\nparams.modes = ["pinned"]\nparams . "sizes" = [0]\n',
     "x.toml: line 4: transfers: size 0 B must be at least 16 B"),
    ('[[run]]\nexperiment = "transfers"\n\nparams = { modes = ["pinned"], sizes = [0] }  # sizes = [1024]\n',
     "x.toml: line 4: transfers: size 0 B must be at least 16 B"),
    ('[[run]]\nexperiment = "transfers"\nparams = { modes = [\n  "pinned",\n], sizes = [0] }\n',
     "x.toml: line 5: transfers: size 0 B must be at least 16 B"),
    ('[[run]]\nexperiment = "reduction"\nprofile = "precise"\n[run.params]\nprofile = "quick"\n',
     "x.toml: line 5: the profile is the suite's or the run's (profile = …), not a parameter"),
    ('# timeout_s = 5\ntitle = "t"  # [[run]]\n#[[run]]\n[[run]]\n# experiment = "x"\nexperiment = "reductio"\n',
     "x.toml: line 6: unknown experiment 'reductio'"),
    ('title = """\n[[run]]\ntimeout_s = 5\n"""\ntimeout_s = -1\n[[run]]\nexperiment = "reduction"\n[[run]]\n'
     'experiment = "coalescing"\n', "x.toml: line 5: timeout_s must be a positive"),
    ('title = """\n[[run]]\n"""\n[[run]]\nexperiment = "reduction"\n[[run]]\nexperiment = "reduction"\n',
     "x.toml: line 6: reduction is listed 2 times (lines 4, 6)"),
    ("[[run]]\nexperiment = 'transfers'\n[run.params]\nmodes = ['pinned', '''\nsizes = [1024]\n''']\nsizes = [0]\n",
     "x.toml: line 7: transfers: size 0 B must be at least 16 B"),
    ('[[run]]\nexperiment = "transfers"\n[run.params]\nmodes = [\n  "pinned", # sizes = [1024]\n]\nsizes = [0]\n',
     "x.toml: line 7: transfers: size 0 B must be at least 16 B"),
    ('# a\u2028b\u0085c\ntimeout_s = -1\n[[run]]\nexperiment = "reduction"\n', "x.toml: line 2: timeout_s must be"),
    ('[colour]\nshade = "red"\n[[run]]\nexperiment = "reduction"\n', "x.toml: line 1: unknown key 'colour'"),
    ('title = "t"\nrun = [{ experiment = "reductio" }]\n', "x.toml: line 2: unknown experiment 'reductio'"),
])
def test_a_key_is_found_on_its_line_in_every_toml_layout(text, expected):
    for ending in ("\n", "\r\n"):  # CRLF line endings count the same lines
        with pytest.raises(suites.SuiteError) as caught:
            suites.parse(text.replace("\n", ending), "x.toml")
        assert any(reason.startswith(expected) for reason in caught.value.reasons), (ending, caught.value.reasons)


def test_a_suite_line_is_the_line_of_its_run_header_whatever_comes_before():
    text = ('title = """\n[[run]]\nexperiment = "coalescing"\n"""  # [[run]]\n\n[[ run ]]  # the first\n'
            'experiment = "reduction"\n[[run]]\nexperiment = "coalescing"\n')
    suite = suites.parse(text.replace("\n", "\r\n"), "x.toml")
    assert [(run.experiment, run.line) for run in suite.runs] == [("reduction", 6), ("coalescing", 8)]


@pytest.mark.parametrize(("text", "expected"), [
    ('[[run]]\nexperiment = "reduction"\n[run.params]\nsizes = [1,\n', "x.toml: line 4: not valid TOML"),  # at the end
    ('[[run]]\nexperiment = "reduction"\nexperiment = "coalescing"\n', "x.toml: line 3: not valid TOML"),
    ('[[run]]\nexperiment = "reduction\n', "x.toml: line 2: not valid TOML"),
    ('[[run]\nexperiment = "reduction"\n', "x.toml: line 1: not valid TOML"),
])
def test_a_toml_error_is_tomllibs_one_line_message(text, expected):
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    [reason] = caught.value.reasons
    assert reason.startswith(expected) and "\n" not in reason, reason


def test_valid_toml_the_syntax_tree_cannot_read_is_still_checked_in_one_line_per_problem():
    # tomllib reads a line-ending backslash followed by spaces in a multi-line string; tree-sitter's grammar does not
    text = 'title = """a \\  \nb"""\n[[run]]\nexperiment = "reduction"\ntimeout_s = -1\n'
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    [reason] = caught.value.reasons
    assert reason.startswith("x.toml: line 1: timeout_s must be a positive"), reason
    assert suites.parse(text.replace("-1", "5"), "x.toml").title == "a b"


def test_a_stored_suite_with_a_lone_surrogate_is_read_with_its_lines():
    text = 'title = "\ud800"\n\ntimeout_s = -1\n[[run]]\nexperiment = "reduction"\n'
    with pytest.raises(suites.SuiteError) as caught:
        suites.stored("f1", "night", text)
    assert caught.value.reasons[0].startswith("fleet f1's suite: line 3: timeout_s must be a positive")


def test_the_largest_allowed_suite_is_read_with_its_lines_within_2_s_of_cpu():
    import time

    runs = ['[[run]]\nexperiment = "reduction"\n' + "".join(f'params."k{run}_{i}" = {i}\n' for i in range(420))
            for run in range(suites.MAX_RUNS)]
    text = "".join(runs)
    assert 0.9 * suites.MAX_SUITE_BYTES < len(text) <= suites.MAX_SUITE_BYTES
    # CPU time of this process, not the wall clock, which a loaded machine stretches: the bound guards against a
    # reading that grows with the square of the suite, not against a busy neighbour.
    started = time.process_time()
    with pytest.raises(suites.SuiteError) as caught:
        suites.parse(text, "x.toml")
    assert time.process_time() - started < 2.0
    assert caught.value.reasons[0].startswith("x.toml: line 3: reduction: unknown parameters: k0_0")
    assert caught.value.reasons[1].startswith("x.toml: line 425: reduction: unknown parameters: k1_0")


def test_the_differences_between_two_suites_name_each_run_and_setting_that_changed():
    stored = suites.parse('timeout_s = 60\n[[run]]\nexperiment = "reduction"\n[run.params]\nsizes = [268435456]\n'
                          '[[run]]\nexperiment = "coalescing"\n', name="night")
    same = suites.parse('# again\ntitle = "Night"\n[[run]]\nexperiment = "coalescing"\ntimeout_s = 60\n[[run]]\n'
                        'experiment = "reduction"\ntimeout_s = 60.0\n[run.params]\nsizes = [268435456]\n', name="night")
    assert suites.differences(stored, same) == []  # comments, title, order and layout measure nothing differently
    changed = suites.parse('timeout_s = 60\n[[run]]\nexperiment = "reduction"\nprofile = "interactive"\n'
                           '[run.params]\nsizes = [1048576]\n[[run]]\nexperiment = "host_latency"\n', name="night")
    assert suites.differences(stored, changed) == [
        "run coalescing: in the stored suite, not in this one",
        "run host_latency: in this suite, not in the stored one",
        "run reduction (line 2): params.sizes [268435456] → [1048576]",
        "run reduction (line 2): profile 'precise/timeout_s=1' → 'interactive'"]


def test_a_profile_with_several_overrides_reaches_every_run_whole():
    """A spec with a comma (``precise/timeout_s=1,hot_max_noise=1``) is one profile: every run gets all of it, passes
    the registry's checks, and the profile it measures with is named by it."""
    suite = suites.parse('profile = "precise/timeout_s=1,hot_max_noise=1"\n[[run]]\nexperiment = "transfers"\n'
                         '[run.params]\nsizes = [1048576]\nmethods = ["single", "batched"]\n[[run]]\n'
                         'experiment = "reduction"\n', "x.toml")
    for run in suite.gpu_runs:
        assert run.params["profile"] == "precise/timeout_s=1,hot_max_noise=1"
        assert request.check_params(run.experiment, run.params, None) == []
        profile = stats.get_profile(run.checked().params.profile)
        assert (profile.name, profile.timeout_s, profile.hot_max_noise) == (run.params["profile"], 1.0, 1.0)
