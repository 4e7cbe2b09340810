"""docs/deploy/ (README, "Deploying several replicas"): CI does not run the compose file, but what it relies on is
checked here — its commands parse, its config names PostgreSQL, and the proxy probes `/healthz`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp_harness.cli import build_parser
from mcp_harness.config import load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy"


def test_the_compose_example_runs_migrate_then_two_replicas_behind_caddy(tmp_path: Path) -> None:
    compose = (DEPLOY / "docker-compose.yml").read_text()
    body = compose.split("\nservices:\n", 1)[1].split("\nvolumes:\n", 1)[0]
    services = re.findall(r"^  ([a-z-]+):", body, flags=re.MULTILINE)
    assert services == ["postgres", "migrate", "replica-a", "replica-b", "proxy"]
    commands = [json.loads(c) for c in re.findall(r"command: (\[.*\])", compose)]
    assert [c[1] for c in commands] == ["migrate", "serve", "serve"]
    for command in commands:
        build_parser().parse_args(command[1:])  # each is a command this version accepts
    assert "service_completed_successfully" in compose and "/healthz" in compose
    assert 'POSTGRES_INITDB_ARGS: "--no-locale' in compose  # the byte order PgDatabase requires

    settings = load_settings(DEPLOY / "config.toml", data_dir=tmp_path)
    assert settings.store.url == "postgresql://harness:harness@postgres/harness"  # the compose file's database
    caddy = (DEPLOY / "Caddyfile").read_text()
    assert "reverse_proxy replica-a:8080 replica-b:8080" in caddy and "health_uri /healthz" in caddy
    assert "lb_policy header Mcp-Session-Id" in caddy
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "'.[postgres]'" in dockerfile
