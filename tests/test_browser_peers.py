"""The Peers page in a real browser at 1920×1080, desk and stage, replaying a made-up node of 8 GPUs
(tests/peer_frames.py, in a folder of its own through PINPOINT_REPLAY_DIR): the matrix is drawn 8 × 8 with its axes
named and every label inside the screen, the stage fits with its takeaway, and the console stays free of errors.
One server for the module."""

import pytest

from tests.browser_helper import CHROMIUM, streamlit_app
from tests.peer_frames import write_recording
from tests.test_stage_browser import SHOTS, WIDTH, check_charts, check_stage, link, open_page, settle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

# Each heatmap as drawn: its axes' titles, the categories on each axis, its cell labels, and any tick label, cell
# label or colour bar that reaches outside the window.
MATRICES = """(width) => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
  const heat = gd._fullData.find(t => t.type === 'heatmap');
  if (!heat) return null;
  const rect = e => e.getBoundingClientRect();
  const outside = Array.from(gd.querySelectorAll('.xtick text, .ytick text, .colorbar, .heatmaplayer text, .gtitle'))
    .filter(e => { const b = rect(e); return b.width > 0 && (b.left < 0 || b.right > width); })
    .map(e => e.textContent.slice(0, 30));
  return {title: (gd._fullLayout.title.text || '').split('<br>')[0],
          x: gd._fullLayout.xaxis.title.text, y: gd._fullLayout.yaxis.title.text,
          columns: heat.x.length, rows: heat.y.length,
          ticks: gd.querySelectorAll('.xtick text').length + gd.querySelectorAll('.ytick text').length,
          cells: Array.from(gd.querySelectorAll('text')).filter(e => /NV18|host/.test(e.textContent)).length,
          outside};
}).filter(Boolean)"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("peer-recordings")
    write_recording(folder, 8, slow=(2, 5), through_host=(6, 7))
    with streamlit_app(PINPOINT_REPLAY_DIR=str(folder)) as url:
        yield url


def test_the_eight_gpu_matrix_reads_well_at_the_desk_and_fits_the_stage(server, browser):
    problems, errors = [], []
    page = open_page(browser, errors)
    for present in (False, True):
        where = f"peers ({'stage' if present else 'desk'})"
        page.goto(link(server, "peers", "present=1" if present else ""))
        settle(page, chart=True, takeaway=present)
        matrices = page.evaluate(MATRICES, WIDTH)
        expected = 1 if present else 3  # one way; at the desk also both ways at once, and latency
        if len(matrices) != expected:
            problems.append(f"{where}: {len(matrices)} matrices drawn, not {expected}")
        for matrix in matrices:
            name = f"{where}, {matrix['title'][:40]}"
            if (matrix["x"], matrix["y"]) != ("destination GPU", "source GPU"):
                problems.append(f"{name}: axes titled {matrix['x']} / {matrix['y']}")
            if (matrix["columns"], matrix["rows"], matrix["ticks"]) != (8, 8, 16):
                problems.append(f"{name}: {matrix['columns']}×{matrix['rows']} cells, {matrix['ticks']} tick labels")
            if matrix["cells"] != 56:  # every pair off the diagonal names its link
                problems.append(f"{name}: {matrix['cells']} cells show their link, not 56")
            if matrix["outside"]:
                problems.append(f"{name}: outside the window: {matrix['outside']}")
        problems += check_charts(page, where)
        if present:
            problems += check_stage(page, where, needs_chart=True)
        elif not page.get_by_text("Topology in words").count():
            problems.append(f"{where}: no topology in words")
        page.screenshot(path=str(SHOTS / f"{'stage' if present else 'desk'}-peers-8gpu.png"), full_page=not present)
    page.close()
    problems += [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)
