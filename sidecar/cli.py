"""The command line: ``sidecar run|validate|demo|drift|dashboards|rules``. The only place that exits."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from sidecar import __version__
from sidecar.errors import ConfigError

__all__ = ["main"]


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One line per HTTP request would drown the sidecar's own messages.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _cmd_validate(args: argparse.Namespace) -> int:
    from sidecar.config import load_config

    cfg = load_config(args.config)
    # model_dump_json masks SecretStr values, so tokens never reach the terminal.
    if args.print:
        print(cfg.model_dump_json(indent=2))
    print(f"{args.config}: OK")
    return 0


async def _serve(cfg_path: str) -> None:
    import uvicorn

    from sidecar.app import create_app
    from sidecar.config import load_config
    from sidecar.runtime import tune_gc
    from sidecar.service import Service

    cfg = load_config(cfg_path)
    service = Service(cfg)
    app = create_app(service)
    server = uvicorn.Server(uvicorn.Config(app, host=cfg.server.host, port=cfg.server.port, log_level="warning",
                                           access_log=False, lifespan="on"))
    tune_gc()
    logging.getLogger("sidecar").info("sidecar %s listening on http://%s:%d", __version__, cfg.server.host,
                                      cfg.server.port)
    await server.serve()


def _cmd_run(args: argparse.Namespace) -> int:
    asyncio.run(_serve(args.config))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from sidecar.demo.run import run_demo

    return run_demo(port=args.port, duration_s=args.duration_secs, workdir=args.workdir)


def _cmd_drift(rest: Sequence[str]) -> int:
    try:
        from sidecar.drift_report import main as drift_main
    except ImportError:
        print("the offline drift report is not available in this build", file=sys.stderr)
        return 2
    return int(drift_main(list(rest)))


def _cmd_dashboards(args: argparse.Namespace) -> int:
    try:
        from dashboards.generate import main as gen
    except ImportError:
        print("dashboard generation is not available in this build", file=sys.stderr)
        return 2
    return int(gen(["--out", args.out] + (["--check"] if args.check else [])))


def _cmd_rules(args: argparse.Namespace) -> int:
    import subprocess
    from pathlib import Path

    rules = sorted(str(p) for p in Path(args.dir).glob("*.rules.yml"))
    if not rules:
        print(f"no *.rules.yml in {args.dir}", file=sys.stderr)
        return 2
    rc = subprocess.call(["promtool", "check", "rules", *rules])
    tests = sorted(str(p) for p in Path(args.dir, "tests").glob("*.test.yml"))
    if rc == 0 and tests:
        rc = subprocess.call(["promtool", "test", "rules", *tests])
    return rc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sidecar", description="Observability and drift sidecar for Triton.")
    p.add_argument("--version", action="version", version=f"sidecar {__version__}")
    p.add_argument("--log-level", default="info")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the sidecar beside a Triton server")
    r.add_argument("--config", required=True)
    v = sub.add_parser("validate", help="check a config file and exit non-zero naming the bad field")
    v.add_argument("--config", required=True)
    v.add_argument("--print", action="store_true", help="print the effective config (secrets masked)")
    d = sub.add_parser("demo", help="start a real Triton with demo models, traffic, and the sidecar")
    d.add_argument("--port", type=int, default=9500)
    d.add_argument("--duration-secs", type=float, default=None, help="stop by itself after this long")
    d.add_argument("--workdir", default=None, help="folder for Triton's files and the sidecar's store")
    sub.add_parser("drift", help="offline drift report: sidecar drift --reference A --current B", add_help=False)
    g = sub.add_parser("dashboards", help="generate Grafana dashboards and provisioning files")
    g.add_argument("--out", default="dashboards")
    g.add_argument("--check", action="store_true", help="fail if the committed JSON is stale")
    ru = sub.add_parser("rules", help="promtool check and test the alerting rules")
    ru.add_argument("--dir", default="alerts")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "drift":
        return _cmd_drift(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    handlers = {"run": _cmd_run, "validate": _cmd_validate, "demo": _cmd_demo, "dashboards": _cmd_dashboards,
                "rules": _cmd_rules}
    try:
        return handlers[args.cmd](args)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
