#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""packaging.dashboard_queries: the shipped dashboard and alert rules against real data.

Usage: dashboard_test.py BULKHEADD BULKHEADCTL HTTP_WORKER DASHBOARD_JSON RULES_YML

Starts a real bulkheadd under load, scraped every second by Debian's Prometheus server on loopback
with the rules loaded (dashboard_stack.py), then checks through Prometheus' HTTP API:
  - every query of every panel of packaging/grafana/bulkhead.json, its Grafana variables replaced
    as Grafana would ($instance: the one scrape target, $cell: all, $__rate_interval: 10s,
    $__range: 5m), returns a sample with a number (not NaN) from the instant query API, while
    the load runs;
  - every series selector in the dashboard and in the rules (name and label matchers, such as
    bulkhead_cell_state{state="failed"}) selects at least one series: a renamed metric or label
    value fails here, also where a rule's expression is empty when nothing is wrong;
  - every rule loaded and was evaluated without an error (health "ok").
Selectors and panels that read only the cgroup families (CGROUP_FAMILIES) have no data here, since
this host test runs with cgroup = "off": vm.containers checks those names against a real cgroup
(tests/vm/scenarios/containers.sh, check metrics.cgroup_families), and this test checks that the
list below is exactly the dashboard's and the rules' cgroup names it passes to that check.
Polls with a deadline; asserts no duration. Exit 0 pass, 1 fail.
"""

import json
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard_stack  # noqa: E402

# Families present only for cells with a cgroup (docs/metrics.md, the second table).
CGROUP_FAMILIES = {
    "bulkhead_cell_memory_bytes",
    "bulkhead_cell_memory_max_bytes",
    "bulkhead_cell_cpu_usage_seconds_total",
    "bulkhead_cell_cpu_throttled_seconds_total",
    "bulkhead_cell_cpu_quota_cpus",
    "bulkhead_cell_tasks",
}
DEADLINE_S = 90
SELECTOR = re.compile(r"\b(bulkhead_[a-z_]+)(\{[^}]*\})?")


def grafana_expr(expr, instance):
    """`expr` with the dashboard's variables replaced as Grafana does for these choices: a regex
    escaped value inside a PromQL string, so each backslash doubled ("127\\\\.0\\\\.0\\\\.1:9464")."""
    return (expr.replace("$__rate_interval", "10s").replace("$__range", "5m")
            .replace("$instance", re.escape(instance).replace("\\", "\\\\"))
            .replace("$cell", ".*"))


def panel_queries(dashboard):
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def rule_exprs(stack):
    groups = stack.api("rules")["groups"]
    return [(rule["name"], rule["query"], rule) for g in groups for rule in g["rules"]]


def families(expr):
    return {name for name, _ in SELECTOR.findall(expr)}


def has_number(result):
    return any(not math.isnan(float(sample["value"][1])) for sample in result)


def main(bulkheadd, bulkheadctl, http_worker, dashboard_path, rules_path):
    with open(dashboard_path) as f:
        dashboard = json.load(f)
    failures = []
    with dashboard_stack.running(bulkheadd, bulkheadctl, http_worker, rules=rules_path,
                                 max_load_seconds=DEADLINE_S + 30) as (stack, load):
        instance = stack.metrics_address
        queries = [(title, grafana_expr(expr, instance)) for title, expr in panel_queries(dashboard)]
        pending = [(t, q) for t, q in queries if not families(q) <= CGROUP_FAMILIES]
        cgroup_only = [(t, q) for t, q in queries if families(q) <= CGROUP_FAMILIES]
        print(f"dashboard: {len(queries)} queries in {len(dashboard['panels'])} panels; "
              f"{len(cgroup_only)} read only cgroup families")

        # Each panel's query gives a number while the load runs.
        def answered(title, q):
            try:
                return has_number(stack.query(q))
            except dashboard_stack.QueryError as e:
                failures.append(f"panel '{title}': refused: {e}")
                return True  # not asked again

        deadline = time.monotonic() + DEADLINE_S
        while pending and time.monotonic() < deadline:
            pending = [(t, q) for t, q in pending if not answered(t, q)]
            if pending:
                time.sleep(1)
        for title, q in pending:
            failures.append(f"panel '{title}': no number within {DEADLINE_S} s: {q} -> "
                            f"{stack.query(q)}")

        # Every rule evaluated at least once, without an error.
        def evaluated_rules():
            rules = rule_exprs(stack)
            # Before its first evaluation a rule's lastEvaluation is the zero time, year 0001.
            done = rules and all(not r["lastEvaluation"].startswith("0001") for _, _, r in rules)
            return rules if done else None

        rules = dashboard_stack.wait_for(evaluated_rules, 30, "every rule evaluated")
        for name, _, rule in rules:
            if rule.get("health") != "ok":
                failures.append(f"rule {name}: health {rule.get('health')}: {rule.get('lastError')}")
        print(f"rules: {len(rules)} loaded and evaluated: {', '.join(n for n, _, _ in rules)}")

        # Every selector selects something (cgroup families: in vm.containers).
        exprs = [q for _, q in queries] + [q for _, q, _ in rules]
        selectors = sorted({(name, matchers) for e in exprs for name, matchers in SELECTOR.findall(e)})
        used_cgroup = {name for name, _ in selectors if name in CGROUP_FAMILIES}
        for name, matchers in selectors:
            if name in CGROUP_FAMILIES:
                continue
            if not stack.query(f"count({name}{matchers})"):
                failures.append(f"selector {name}{matchers} selects no series")
        print(f"selectors: {len(selectors)} checked, {len(used_cgroup)} cgroup families left to "
              f"vm.containers")
        if used_cgroup != CGROUP_FAMILIES:
            failures.append(f"the dashboard and rules read the cgroup families {sorted(used_cgroup)},"
                            f" not {sorted(CGROUP_FAMILIES)}: update CGROUP_FAMILIES and the "
                            f"metrics.cgroup_families check of tests/vm/scenarios/containers.sh")
        load.stop()
        answers = load.answers
        print("load: " + ", ".join(f"{c} {s}: {n}" for (c, s), n in sorted(answers.items(), key=str)))
        # The load did what the panels are meant to show: answers, rejections (503), a worker that
        # died with a request in hand (502).
        for cell, status in (("api", 200), ("api", 503), ("flaky", 200), ("flaky", 502)):
            if not answers.get((cell, status)):
                failures.append(f"the load got no {status} from {cell}: {answers}")
    for failure in failures:
        print("FAIL: " + failure)
    print(f"{len(queries) + len(rules) + len(selectors) - len(failures)} passed, "
          f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
