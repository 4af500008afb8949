"""The command line: ``sidecar run|validate|doctor|demo|drift|dashboards|rules``. The only place that exits."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from sidecar import __version__
from sidecar.errors import ConfigError, StoreError

__all__ = ["main"]


class _MaskCredentials(logging.Filter):
    """Masks any user:password@ in a URL of a log line, whichever component (or library) wrote it."""

    def filter(self, record: logging.LogRecord) -> bool:
        from sidecar.redact import mask_text

        message = record.getMessage()
        masked = mask_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_MaskCredentials())
    # One line per HTTP request would drown the sidecar's own messages.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _cmd_validate(args: argparse.Namespace) -> int:
    import json

    from sidecar.config import load_config
    from sidecar.redact import mask_headers, mask_text

    cfg = load_config(args.config)

    def masked(value: object, key: str = "") -> object:
        # SecretStr fields already dump as '**********'; URLs and header maps are plain strings and dicts.
        if isinstance(value, dict):
            items = mask_headers(value) if key == "headers" else value
            return {k: masked(v, str(k)) for k, v in items.items()}
        if isinstance(value, list):
            return [masked(v, key) for v in value]
        return mask_text(value) if isinstance(value, str) else value

    if args.print:
        print(json.dumps(masked(cfg.model_dump(mode="json")), indent=2))
    print(f"{args.config}: OK")
    return 0


async def _serve(cfg_path: str) -> None:
    from sidecar.app import create_app
    from sidecar.config import load_config
    from sidecar.httpserver import uvicorn_server
    from sidecar.instance import StoreLock, bind_listener
    from sidecar.runtime import tune_gc
    from sidecar.service import Service

    cfg = load_config(cfg_path)
    # Port first, then the store's lock, then the components: a second instance fails before it touches
    # anything the first one owns.
    sock = bind_listener(cfg.server.host, cfg.server.port)
    lock = StoreLock(cfg.store.path)
    try:
        lock.acquire()
        service = Service(cfg)
        server = uvicorn_server(create_app(service), cfg.server, registry=service.registry)
        tune_gc(cfg.runtime)
        host, port = sock.getsockname()[:2]
        logging.getLogger("sidecar").info("sidecar %s listening on http://%s:%d", __version__, host, port)
        await server.serve(sockets=[sock])
    finally:
        lock.release()
        sock.close()


def _cmd_run(args: argparse.Namespace) -> int:
    from sidecar.runtime import run

    run(_serve(args.config))
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from sidecar.config import load_config
    from sidecar.diagnose.doctor import CannotRun, run_doctor

    cfg = load_config(args.config)
    try:
        found = run_doctor(cfg, wait_s=args.wait_secs)
    except CannotRun as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    for d in found:
        print(d.line())
    if not found:
        print("no problems found")
    return 1 if found else 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from sidecar.demo.run import run_demo

    return run_demo(port=args.port, duration_s=args.duration_secs, workdir=args.workdir, keep=args.keep, act=args.act)


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

    if args.fleet:
        from sidecar.fleet_rules import FleetRulesOptions, write

        try:
            opts = FleetRulesOptions(
                window_secs=args.window_secs, features=args.features, ks_effect_floor=args.ks_effect_floor
            )
        except ValueError as exc:
            print(f"rules --fleet: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {write(Path(args.out or args.dir), opts)}")
        if args.k8s:
            from sidecar.fleet_k8s import write_k8s

            print("wrote " + " ".join(str(p) for p in write_k8s(Path(args.k8s), opts)))
        return 0
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
    dr = sub.add_parser(
        "doctor", help="diagnose the Triton beside this config; exit 0 healthy, 1 problems, 2 cannot run"
    )
    dr.add_argument("--config", required=True)
    dr.add_argument("--wait-secs", type=float, default=5.0, help="seconds between the two probes of Triton")
    d = sub.add_parser("demo", help="start a real Triton with demo models, traffic, and the sidecar")
    d.add_argument("--port", type=int, default=9500)
    d.add_argument("--duration-secs", type=float, default=None, help="stop by itself after this long")
    d.add_argument("--workdir", default=None, help="folder for Triton's files and the sidecar's store (kept)")
    d.add_argument("--keep", action="store_true", help="keep the temporary work folder on exit")
    d.add_argument(
        "--act",
        action="store_true",
        help="let the actions layer carry out its plans (the fraud revert), with Triton in explicit model-control "
        "mode; default: dry-run (plans shown on / and printed, nothing sent)",
    )
    sub.add_parser(
        "drift", help="offline drift report: sidecar drift --reference A --current B [--html FILE]", add_help=False
    )
    g = sub.add_parser("dashboards", help="generate Grafana dashboards and provisioning files")
    g.add_argument("--out", default="dashboards")
    g.add_argument("--check", action="store_true", help="fail if the committed JSON is stale")
    ru = sub.add_parser("rules", help="promtool check and test the alerting rules")
    ru.add_argument("--dir", default="alerts")
    ru.add_argument("--fleet", action="store_true", help="write fleet.rules.yml (drift merged across sidecars)")
    ru.add_argument("--out", default=None, help="--fleet: folder to write into (default: --dir)")
    ru.add_argument("--k8s", default=None, help="--fleet: also write PrometheusRule, PodMonitor, Deployment here")
    ru.add_argument("--window-secs", type=float, default=1800.0, help="--fleet: span each look merges")
    ru.add_argument("--features", type=int, default=20, help="--fleet: features per model sharing the budget")
    ru.add_argument("--ks-effect-floor", type=float, default=0.02, help="--fleet: smallest binned D that alerts")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "drift":
        return _cmd_drift(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    handlers = {
        "run": _cmd_run,
        "validate": _cmd_validate,
        "demo": _cmd_demo,
        "doctor": _cmd_doctor,
        "dashboards": _cmd_dashboards,
        "rules": _cmd_rules,
    }
    try:
        return handlers[args.cmd](args)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"store error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
