"""`recommend --report out.html` opened in headless Chromium (the Debian package), `--csv` on the list commands, and
shell completion."""

import csv
import io
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from tests.conftest import BIN, assert_user_error

QUERY = ("recommend", "--gpu", "RTX 4090", "--vram", "24")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        import os

        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs the Debian package")
        pytest.skip("apt-get install chromium")
    return exe


def run_chromium(*args: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", *args, url],
                          capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


class Page(HTMLParser):
    """The report's circles (class, data-*) and ranked-table rows."""

    def __init__(self):
        super().__init__()
        self.circles, self.rows, self.external = [], [], []
        self._in_ranked, self._row = False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "img", "link", "iframe") and (a.get("src") or a.get("href")):
            self.external.append((tag, a))
        if tag == "svg" and a.get("id") == "pareto":
            self.axes = (a["data-quality-figure"], a["data-latency-figure"])
        if tag == "circle" and a.get("class") in ("front", "dominated"):
            self.circles.append((a["class"], float(a["data-quality"]), float(a["data-latency-ms"]),
                                 float(a["data-memory-bytes"])))
        if tag == "table":
            self._in_ranked = a.get("id") == "ranked"
        if tag == "tr" and self._in_ranked:
            self._row = []

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        if tag == "table":
            self._in_ranked = False

    def handle_data(self, data):
        if self._row is not None:
            self._row.append(data)


def test_report_renders_in_chromium_with_the_ranking_and_a_true_pareto_front(cli, tmp_path):
    out = tmp_path / "out.html"
    r = cli(*QUERY, "--report", str(out))
    assert r.code == 0, r.err
    rec = cli(*QUERY, "--json").json()
    page = Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.external == []  # self-contained: nothing fetched
    # the ranked table: the same candidates as --json, in order, with provenance marks
    ranked = [row for row in page.rows if row and row[0].strip().isdigit()]
    assert [(row[1], row[2], row[3]) for row in ranked] == \
        [(c["model"], c["quant"], c["engine"]) for c in rec["candidates"]]
    assert any(m in "".join(ranked[0]) for m in "ᵐᶜᵖᵉ")
    # every feasible candidate with a quality, latency and memory figure is on the chart ...
    assert len(page.circles) > len(rec["candidates"])
    pts = [(q, lat, mem) for _, q, lat, mem in page.circles]
    front = {p for cls, *p in page.circles if cls == "front" for p in [tuple(p)]}

    higher = page.axes[0] != "ppl_ratio"  # accuracies: higher is better; the perplexity ratio: lower

    def dom(a, b):  # a dominates b on quality, latency and memory (lower latency and memory are better)
        better_q = a[0] >= b[0] if higher else a[0] <= b[0]
        return better_q and a[1] <= b[1] and a[2] <= b[2] and a != b

    # ... and the front is exactly the candidates no other one dominates (checked by brute force here)
    assert front == {p for p in pts if not any(dom(o, p) for o in pts)}
    assert 0 < len(front) < len(pts)
    # the top pick is on the chart (the score also weighs the ppl ratio, so it need not be on this front)
    top = rec["candidates"][0]["figures"]
    qual, lat = page.axes
    assert lat == "ttft_ms" and qual in top  # the chart's axes are figures of the JSON answer
    assert (top[qual]["value"], top[lat]["value"], top["total_vram_bytes"]["value"]) in set(pts)
    # exclusions and the tornado are there
    html = out.read_text(encoding="utf-8")
    assert "id='exclusion-reasons'" in html and "GPU memory" in html and "id='tornado'" in html
    # headless Chromium: the page's script ran over a laid-out chart, no console message, a real screenshot
    dom_run = run_chromium("--dump-dom", url=out.as_uri())
    assert dom_run.returncode == 0, dom_run.stderr[-2000:]
    m = re.search(r'data-rendered="(\d+) points, (\d+) bars, chart (\d+) px"', dom_run.stdout)
    assert m, dom_run.stdout[:500]
    assert int(m.group(1)) == len(page.circles) and int(m.group(2)) > 0 and int(m.group(3)) > 500
    assert console_messages(dom_run.stderr) == []
    shot = tmp_path / "shot.png"
    s = run_chromium(f"--screenshot={shot}", "--window-size=1300,2600", url=out.as_uri())
    assert s.returncode == 0 and shot.is_file(), s.stderr[-2000:]
    assert console_messages(s.stderr) == []
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1300, 2600)
    colors = img.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50  # text, bars and circles, not a blank page
    # the Pareto front's red is drawn
    assert any(abs(r - 0xd6) < 12 and abs(g - 0x27) < 12 and abs(b - 0x28) < 12 for _, (r, g, b) in colors)


def test_the_console_check_sees_a_page_with_an_error(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    assert console_messages(run_chromium("--dump-dom", url=bad.as_uri()).stderr)


def test_report_path_must_be_html(cli, tmp_path):
    assert_user_error(cli(*QUERY, "--report", str(tmp_path / "out.png")))
    assert_user_error(cli(*QUERY, "--report", str(tmp_path / "missing" / "out.html")))


def test_csv_is_the_json_answer_as_a_table(cli):
    rec = cli(*QUERY, "--json").json()
    r = cli(*QUERY, "--csv")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert len(rows) == len(rec["candidates"])
    for row, c in zip(rows, rec["candidates"]):
        assert (row["model"], row["quant"], int(row["batch"]), int(row["context_tokens"])) == \
            (c["model"], c["quant"], c["batch"], c["context_tokens"])
        for name in ("ttft_ms", "total_vram_bytes", "zh_accuracy"):
            f = c["figures"][name]
            assert row[f"{name}_provenance"] == f["provenance"]
            assert (row[name] == "" and f["value"] is None) or float(row[name]) == pytest.approx(f["value"])
    models = cli("catalog", "list", "--json").json()
    listed = list(csv.DictReader(io.StringIO(cli("catalog", "list", "--csv").out)))
    assert [m["id"] for m in listed] == [m["id"] for m in models]
    profs = list(csv.DictReader(io.StringIO(cli("hardware", "--profiles", "--csv").out)))
    assert [int(p["memory_bytes"]) for p in profs] == [p["memory_bytes"] for p in cli("hardware", "--profiles",
                                                                                          "--json").json()]
    assert_user_error(cli(*QUERY, "--csv", "--json"))


def test_shell_completion_is_on(cli):
    # --show-completion detects the shell it is run from (shellingham reads the parent processes), so it runs under
    # bash as a user's would: run straight from a pytest whose parent is no shell (a detached CI job) it finds none
    r = subprocess.run(["bash", "-c", f"'{BIN / 'recommender'}' --show-completion"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "_recommender_completion" in r.stdout, r.stderr
    env = {"_RECOMMENDER_COMPLETE": "complete_bash", "COMP_WORDS": "recommender pro", "COMP_CWORD": "1"}
    assert cli(env=env).out.split() == ["probe"]
    env = {"_RECOMMEND_COMPLETE": "complete_bash", "COMP_WORDS": "recommend --rep", "COMP_CWORD": "1"}
    assert cli(prog="recommend", env=env).out.split() == ["--report"]
