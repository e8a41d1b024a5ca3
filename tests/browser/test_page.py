"""results/index.html in headless Chromium (Debian's chromium + chromium-driver, driven by
selenium): merged records from two runners render, filters and sorting work, charts draw, a
conflict shows, and record text holding <script> and <img onerror> is shown as text with nothing
executed. Skipped where Chromium is missing, unless COMPAT_REQUIRE_BROWSER=1 (CI sets it)."""

import json
import os
import re
import shutil

import pytest

from conftest import ROOT, p4_record, real_records, run_compat, second_runner

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
XSS_SIGNATURE = '<script>window.__pwned = "script"</script> RuntimeError'
XSS_EXCERPT = "<img src=x onerror=\"window.__pwned = 'img'\"> <svg onload=\"window.__pwned = 'svg'\"></svg> end of log"


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("COMPAT_REQUIRE_BROWSER") == "1":
            pytest.fail(
                "COMPAT_REQUIRE_BROWSER=1 but chromium/chromedriver are not installed (apt-get install chromium "
                "chromium-driver)"
            )
        pytest.skip("no chromium and chromedriver on this host (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """Two runners' files merged by the CLI: this machine's CPU records, and a second runner
    with a P4 record, a CPU record that disagrees (its error text hostile) and a corrupt line."""
    tmp = tmp_path_factory.mktemp("page")
    cpu = real_records(12)
    passed = next(r for r in cpu if r["outcome"] == "pass")
    hostile = second_runner(
        passed,
        "ci-cpu-2",
        outcome="fail",
        losses=None,
        finished_at="2026-11-23T09:00:00+00:00",
        error={"type": "RuntimeError", "message": XSS_SIGNATURE, "signature": XSS_SIGNATURE, "excerpt": XSS_EXCERPT},
    )
    (tmp / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cpu))
    (tmp / "b.jsonl").write_text(json.dumps(p4_record(passed)) + "\n{broken\n" + json.dumps(hostile) + "\n")
    proc = run_compat("merge", str(tmp / "a.jsonl"), str(tmp / "b.jsonl"), "--into", str(tmp / "results"))
    assert proc.returncode == 1 and f"{tmp / 'b.jsonl'}:2: not a JSON record" in proc.stderr, proc.stderr
    return {"url": (tmp / "results" / "index.html").as_uri(), "cpu": cpu, "passed": passed, "hostile": hostile}


def visible_rows(driver):
    return driver.find_elements("css selector", "#cells tbody tr")


def test_rows_filters_and_sorting(browser, page):
    from selenium.webdriver.support.ui import Select

    browser.get(page["url"])
    rows = visible_rows(browser)
    total = len(rows)
    # one row per cell and versions: the disagreeing CPU record shares its row (marked), the P4 adds one
    assert total == len({r["cell"] for r in page["cpu"]}) + 1
    assert browser.find_element("id", "shown").text == f"{total} of {total} rows shown"

    Select(browser.find_element("id", "filter-hardware")).select_by_value("sm_61 — Tesla P4")
    (row,) = visible_rows(browser)
    assert row.get_attribute("data-hardware") == "sm_61 — Tesla P4"
    assert "#hardware=" in browser.current_url  # the view can be linked
    Select(browser.find_element("id", "filter-hardware")).select_by_value("")

    Select(browser.find_element("id", "filter-outcome")).select_by_value("fail")
    fails = visible_rows(browser)
    assert fails and len(fails) < total and {r.get_attribute("data-outcome") for r in fails} == {"fail"}
    Select(browser.find_element("id", "filter-outcome")).select_by_value("")

    browser.find_element("css selector", "#filter-conflicts").click()
    assert len(visible_rows(browser)) == 1
    browser.find_element("css selector", "#filter-conflicts").click()

    browser.find_element("css selector", "th[data-sort=peak]").click()
    peaks = browser.execute_script(
        "return [...document.querySelectorAll('#cells tbody tr')].map(tr => tr.getAttribute('data-id'))"
    )
    data = browser.execute_script("return JSON.parse(document.getElementById('compat-data').textContent).rows")
    by_id = {r["id"]: r["peak"] or 0 for r in data}
    assert [by_id[i] for i in peaks] == sorted(by_id[i] for i in peaks)
    assert browser.find_element("css selector", "th[data-sort=peak]").get_attribute("aria-sort") == "ascending"


def test_charts_render_per_card_memory(browser, page):
    browser.get(page["url"])
    assert len(browser.find_elements("css selector", "#outcome-chart rect")) >= 2
    # every row with memory figures has its per-card bars
    bars = browser.execute_script(
        "return [...document.querySelectorAll('#cells tbody tr')].map(tr => tr.querySelectorAll('svg.mem rect').length)"
    )
    assert all(n >= 1 for n in bars)
    two_rank = [r for r in page["cpu"] if r["axes"]["ranks"] == 2]
    if two_rank:
        tr = browser.find_element("css selector", f"#cells tbody tr[data-id='{two_rank[0]['id']}']")
        assert len(tr.find_elements("css selector", "svg.mem rect")) == 2  # one bar per rank
    # the P4 row's detail: a chart with allocated, reserved, NVML used and RSS for its card
    browser.find_element("css selector", "#cells tbody tr[data-hardware='sm_61 — Tesla P4']").click()
    chart = browser.find_element("id", "card-chart")
    classes = {r.get_attribute("class") for r in chart.find_elements("css selector", "rect")}
    assert {"bar-allocated", "bar-reserved", "bar-nvml_used", "bar-rss"} <= classes
    widths = {
        r.get_attribute("class"): float(r.get_attribute("width"))
        for r in chart.find_elements("css selector", "rect[class^=bar-]")
    }
    # 300 < 420 < 700 < 900 MiB
    assert widths["bar-allocated"] < widths["bar-reserved"] < widths["bar-nvml_used"] < widths["bar-rss"]
    detail = browser.find_element("id", "detail").text
    assert "measured" in detail and page["passed"]["id"] not in detail  # the P4 row is the second runner's own record
    assert "merged from\nb.jsonl:1" in detail


def test_hostile_record_text_is_shown_as_text_and_never_runs(browser, page):
    browser.get(page["url"])
    hostile = page["hostile"]
    tr = browser.find_element("css selector", f"#cells tbody tr[data-id='{hostile['id']}']")
    assert XSS_SIGNATURE in tr.text
    assert "conflict" in tr.text
    tr.click()
    assert browser.find_element("css selector", "#detail pre.excerpt").text == XSS_EXCERPT
    assert browser.find_element("css selector", "#detail pre.error-text").text == XSS_SIGNATURE
    assert browser.execute_script("return window.__pwned === undefined")
    assert (
        browser.execute_script(
            "return document.querySelectorAll('img, #cells script, #detail script, #detail svg[onload]').length"
        )
        == 0
    )
    conflicts = browser.find_element("id", "conflicts")
    assert conflicts.is_displayed()
    assert "ci-cpu-2" in conflicts.text and "from a.jsonl" in conflicts.text
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe  # no script error, no blocked inline script


def _render_page(tmp_path, rows_data):
    """A page rendered straight from page data (no merge, so no validation in front of it): the
    page itself must hold whatever its data says."""
    from harness.render import page as page_module

    data = page_module.page_data([], 0, None, [])
    data["rows"] = rows_data
    path = tmp_path / "index.html"
    path.write_text(page_module.render(data, "compat table"), encoding="utf-8")
    return path.as_uri()


def _row_of(rec):
    from harness.render import page as page_module

    return page_module.row(rec, None, None)


def test_a_row_naming_a_known_issue_constructor_and_a_disguised_ci_link_is_shown_as_text(browser, tmp_path):
    """TEST INPUT built from the project's first real record: known issue id "constructor" (an
    object lookup found Object's own constructor and the detail panel threw) and a CI run address
    whose host is evil.example behind a github.com userinfo."""
    row = _row_of(real_records(1)[0])
    row.update(known_issues=["constructor"], ci_run="https://github.com@evil.example/o/r/actions/runs/1")
    browser.get(_render_page(tmp_path, [row]))
    browser.find_element("css selector", f"#cells tbody tr[data-id='{row['id']}']").click()
    detail = browser.find_element("id", "detail")
    assert "Known issue: constructor" in detail.text and "not in this page's known-issue base" in detail.text
    assert "https://github.com@evil.example/o/r/actions/runs/1" in detail.text
    assert detail.find_elements("css selector", "a[href*='evil.example']") == []
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe


def test_a_page_of_130k_rows_lists_them_a_thousand_at_a_time(browser, tmp_path):
    """Math.max(...rows) overflowed the call stack at this size and the page showed nothing; it
    lists the first thousand matching rows and more on request."""
    base = _row_of(real_records(1)[0])
    rows = [dict(base, id=f"{i:032x}", cell=f"{base['cell']}-{i}") for i in range(130_000)]
    browser.get(_render_page(tmp_path, rows))
    assert (
        browser.find_element("id", "shown").text
        == "1000 of 130000 matching rows listed (130000 rows in all) list 1000 more"
    )
    assert len(visible_rows(browser)) == 1000
    browser.find_element("id", "more").click()
    assert len(visible_rows(browser)) == 2000
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe


def test_the_gpu_picker_shows_what_was_measured_on_a_card_and_what_is_predicted(browser, page):
    from selenium.webdriver.support.ui import Select

    from harness.evidence.summary import hardware_label

    browser.get(page["url"])
    cpu_label = hardware_label(page["cpu"][0])
    # the first screen: the first hardware with records and its support statements
    assert (
        Select(browser.find_element("id", "gpu-picker")).first_selected_option.get_attribute("value")
        == "hw:" + cpu_label
    )
    (cpu,) = browser.find_elements("css selector", "#pick-measured .support-of")
    assert cpu.get_attribute("data-hardware") == cpu_label and "measured by runner ci-cpu-2 (merged)" in cpu.text
    # the hostile record disagrees with this host's own: that entry works, with a note
    disputed = cpu.find_elements(
        "css selector", f"td.entry[data-state=note][data-stack='{page['passed']['axes']['stack']}']"
    )
    assert disputed
    disputed[0].click()
    why = browser.find_element("id", "pick-why")
    assert why.is_displayed() and "runners disagree on " + page["passed"]["cell"] in why.text
    browser.find_element("id", "why-cells").click()
    shown = visible_rows(browser)
    assert shown and {r.get_attribute("data-hardware") for r in shown} == {cpu_label}
    # the disputed cell's row shown: the newer record
    assert page["hostile"]["id"] in {r.get_attribute("data-id") for r in shown}

    # a card with a (contributed) record: measured on its architecture, and predicted beside it
    Select(browser.find_element("id", "gpu-picker")).select_by_value("gpu:Tesla P4")
    (p4,) = browser.find_elements("css selector", "#pick-measured .support-of")
    assert p4.get_attribute("data-hardware") == "sm_61 — Tesla P4"
    assert "measured by runner ci-gpu-p4 (merged)" in p4.text and "driver 550.54" in p4.text
    assert p4.find_elements("css selector", "td.entry[data-state=works]")
    # each stack on the card: what passed, and what compat's grids plan for sm_61 that has not run
    by_stack = {r.get_attribute("data-stack"): r.text for r in p4.find_elements("css selector", "tr.by-stack")}
    # passed 1, none failed, 0 unsupported, the rest of its planned cells not run
    assert re.search(r" 1 — 0 \d+ of \d+ planned$", by_stack[page["passed"]["axes"]["stack"]])
    assert "no record" in by_stack["hf2024"] and by_stack["hf2024"].endswith("12 of 12 planned")
    assert {"hf2025", "hf2026", "canary", "bnb046"} <= set(by_stack)
    card = browser.find_element("css selector", "#pick-predicted div.predicted-of[data-gpu='Tesla P4']")
    answer = card.find_element("css selector", "dl.predicted-card[data-gpu='Tesla P4']").text
    assert "compute capability 6.1" in answer and "precision fp32" in answer
    # issue 43, item 10: the one-line answer first, its rules folded until asked for
    folded = card.find_element("css selector", "details.evidence")
    assert folded.get_attribute("open") is None and "rule fp32-without-tensor-cores" not in card.text
    folded.find_element("css selector", "summary").click()
    assert "rule fp32-without-tensor-cores" in card.text
    # choosing a card shows its architecture's cells only, until "show all"
    shown = visible_rows(browser)
    assert shown and {r.get_attribute("data-hardware").split(" ")[0] for r in shown} == {"sm_61"}
    assert "cells of sm_61" in browser.find_element("id", "picked-note").text
    browser.find_element("id", "picked-clear").click()
    assert len(visible_rows(browser)) > len(shown)

    # a card nothing was measured on: said so, then the prediction and its rules
    Select(browser.find_element("id", "gpu-picker")).select_by_value("gpu:H100")
    assert browser.find_elements("css selector", "#pick-measured .support-of") == []
    assert "Nothing measured on this architecture yet" in browser.find_element("id", "nothing-measured").text
    h100 = browser.find_element("css selector", "#pick-predicted div.predicted-of[data-gpu='H100']")
    h100.find_element("css selector", "details.evidence summary").click()
    assert "rule bf16-needs-cc-8.0" in h100.text and "predicted" in h100.text
    assert "gpu=gpu%3AH100" in browser.current_url
    browser.get(browser.current_url)  # the address keeps the pick
    assert Select(browser.find_element("id", "gpu-picker")).first_selected_option.get_attribute("value") == "gpu:H100"
    # issue 43, item 6: a card of another backend, predicted from its backend's facts (no compute capability)
    Select(browser.find_element("id", "gpu-picker")).select_by_value("gpu:AMD Instinct MI300X")
    mi300x = browser.find_element("css selector", "#pick-predicted div.predicted-of[data-gpu='AMD Instinct MI300X']")
    line = mi300x.find_element("css selector", "dl.predicted-card").text
    assert "ROCm, predicted only (gfx942)" in line and "torch 2.13.0+rocm7.2" in line and "undefined" not in line
    mi300x.find_element("css selector", "details.evidence summary").click()
    assert "rule torch-on-rocm" in mi300x.text and "FNUZ" in mi300x.text
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe


def test_measurement_runs_are_their_own_part_of_the_table(browser, tmp_path):
    """TEST INPUT built from the project's first real record: one row a feature check, one a
    measurement run (a size-sweep cell)."""
    from selenium.webdriver.support.ui import Select

    base = _row_of(real_records(1)[0])
    check = dict(base, measurement=False)
    sweep = dict(base, id="f" * 32, cell=base["cell"] + "-m_fit_w256_l2_v8k_s128", measurement=True)
    browser.get(_render_page(tmp_path, [check, sweep]))
    assert [r.get_attribute("data-id") for r in visible_rows(browser)] == [check["id"]]
    Select(browser.find_element("id", "filter-run")).select_by_value("measurement run")
    assert [r.get_attribute("data-id") for r in visible_rows(browser)] == [sweep["id"]]


def test_a_stack_that_trains_differently_is_marked_and_its_detail_says_where(browser, tmp_path):
    """The real records of transformers 4.51.3's and 5.23.0's fp32 LoRA cell (results/records.jsonl,
    2026-11-26): the 4.51.3 row carries its verdict, parted at step 1; a `why` holding markup and a
    verdict without its losses (both made up) are shown as text, and the detail still opens."""
    from harness.evidence import records

    recs, _ = records.read_records([ROOT / "results" / "records.jsonl"])
    by_id = {r["id"][:12]: r for r in recs}
    hf2026, hf2025 = _row_of(by_id["98c25c16b93c"]), _row_of(by_id["50e4989f75d5"])
    odd = dict(
        hf2026,
        id="e" * 32,
        cell=hf2026["cell"] + "-x",
        agreement={"status": "not-compared", "reference": "hf2026", "why": '<img src=x onerror="window.__pwned = 1">'},
    )
    browser.get(_render_page(tmp_path, [hf2026, hf2025, odd]))
    row = browser.find_element("css selector", f"#cells tbody tr[data-id='{hf2025['id']}']")
    assert "≠ hf2026 from step 1" in row.text
    assert "≠" not in browser.find_element("css selector", f"#cells tbody tr[data-id='{hf2026['id']}']").text
    row.click()
    detail = browser.find_element("id", "detail").text
    assert "trains differently from hf2026: from step 1" in detail and "4.6896 against 4.8571" in detail
    browser.find_element("css selector", f"#cells tbody tr[data-id='{odd['id']}']").click()
    assert 'onerror="window.__pwned = 1"' in browser.find_element("id", "detail").text
    assert browser.execute_script("return window.__pwned === undefined")
    bare = dict(
        hf2025,
        id="d" * 32,
        cell=hf2025["cell"] + "-y",
        agreement={"status": "differs", "reference": "hf2026", "parted_at_step": 3},
    )
    browser.get(_render_page(tmp_path, [bare]))  # made up: a verdict without its losses, as the schema allows
    browser.find_element("css selector", f"#cells tbody tr[data-id='{bare['id']}']").click()
    assert "from step 3 (0: the eval loss before training), — against —" in browser.find_element("id", "detail").text


@pytest.mark.parametrize("width", [1400, 1920, 390], ids=["1400px", "1920px", "phone"])
def test_the_published_page_keeps_every_stack_in_view_at_each_width(browser, width):
    """Issue 43, item 10: the "what works" table overflowed its panel at 1400 and 1920 px and hid
    the newest stack. The published page (results/index.html, the project's real records): at
    desktop widths every stack's column is inside the panel; on a phone the table scrolls inside
    its own box and nothing widens the page."""
    browser.set_window_size(width, 1000)
    try:
        browser.get((ROOT / "results" / "index.html").as_uri())
        panel = browser.find_element("id", "my-gpu")
        tables = panel.find_elements("css selector", ".support-of table.support:not(.by-stack)")
        assert tables
        edge = browser.execute_script("return arguments[0].getBoundingClientRect().right", panel)
        page = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert page[0] <= page[1], page  # nothing widens the page
        for table in tables:
            last = table.find_elements("css selector", "thead th")[-1]
            right = browser.execute_script("return arguments[0].getBoundingClientRect().right", last)
            box = browser.execute_script("return arguments[0].parentElement.getBoundingClientRect().right", table)
            assert box <= edge + 1  # the table's box stays in the panel
            if width >= 1400:
                assert right <= edge + 1, (width, right, edge)  # the newest stack in view, no scrolling
    finally:
        browser.set_window_size(1400, 1000)
