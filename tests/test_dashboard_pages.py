"""How the dashboard is assembled: build() only puts the app together, and every page is a blueprint's,
one per area (delayed.ops.dashboard.app.PAGES), so a new page goes into its area's module."""
import ast

from delayed.ops.dashboard import create_app
from delayed.ops.dashboard.app import PAGES

from .conftest import ROOT


def test_every_route_is_a_page_of_an_area(conn):
    app = create_app(conn)
    app.extensions["delayed_sampler"].stop()
    areas = {pages.name for pages in PAGES}
    endpoints = [rule.endpoint for rule in app.url_map.iter_rules() if rule.endpoint != "static"]
    assert len(endpoints) > 10 and [endpoint for endpoint in endpoints if endpoint.split(".")[0] not in areas] == []


def test_build_defines_no_view_of_its_own():
    [build] = [node for node in ast.parse((ROOT / "delayed" / "ops" / "dashboard" / "app.py").read_text()).body
               if isinstance(node, ast.FunctionDef) and node.name == "build"]
    assert [node.name for node in ast.walk(build) if isinstance(node, ast.FunctionDef) and node is not build] == []
