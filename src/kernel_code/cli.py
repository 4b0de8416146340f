"""The ``kernel-code`` command. Engine errors become one clear line on stderr, here and only here."""

from __future__ import annotations

import argparse
import json
import sys
from typing import NoReturn

from kernel_code import (
    config_cmd,
    dashboard_cmd,
    doctor_cmd,
    hardware_cmd,
    optimize_cmd,
    profile_cmd,
    replay_cmd,
    sessions_cmd,
    skills_cmd,
    sweep_cmd,
    traces_cmd,
)
from kernel_code.arguments import add_problem_arguments, positive_float
from kernel_code.tui import launch as tui_launch
from openkernel import EvalConfig, EvalResult, OpenKernelError, evaluate_candidate, load_problem
from openkernel.critic import Diagnosis, RuleCritic, op_classes_of, snapshot_of

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong and where to look), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> _Parser:
    parser = _Parser(prog="kernel-code", description="Optimise GPU kernels against a PyTorch reference.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ev = sub.add_parser("eval", help="evaluate one candidate kernel against a reference problem")
    add_problem_arguments(ev)
    ev.add_argument(
        "--timeout", type=positive_float, default=300.0, help="seconds for the candidate's whole evaluation"
    )
    ev.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ev.add_argument("--backend", choices=["triton", "cuda"], default="triton")
    ev.add_argument("--trials", type=int, default=5, help="correctness trials with fresh inputs and weights")
    ev.add_argument("--samples", type=int, default=None, help="timed calls (default 50 on a GPU, 5 on the CPU)")
    ev.add_argument("--compile-baseline", action="store_true", help="also time torch.compile of the reference")
    ev.add_argument(
        "--hardware", default=None, help="the roofline's target GPU when none is here (default H200), e.g. A100-80GB"
    )
    hardware_cmd.add_parser(sub)
    skills_cmd.add_parser(sub)
    profile_cmd.add_parser(sub)
    sessions_cmd.add_parser(sub)
    optimize_cmd.add_parsers(sub)
    sweep_cmd.add_parser(sub)
    replay_cmd.add_parser(sub)
    config_cmd.add_parser(sub)
    doctor_cmd.add_parser(sub)
    tui_launch.add_view_parser(sub)
    traces_cmd.add_parser(sub)
    dashboard_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        handler = {
            "eval": _eval,
            "hardware": hardware_cmd.run,
            "skills": skills_cmd.run,
            "profile": profile_cmd.run,
            "sessions": sessions_cmd.run,
            "optimize": optimize_cmd.run_optimize,
            "resume": optimize_cmd.run_resume,
            "sweep": sweep_cmd.run,
            "replay": replay_cmd.run,
            "config": config_cmd.run,
            "doctor": doctor_cmd.run,
            "view": tui_launch.run_view,
            "traces": traces_cmd.run,
            "dashboard": dashboard_cmd.run,
        }[args.command]
        return handler(args)
    except OpenKernelError as err:
        print(f"kernel-code: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernel-code: interrupted", file=sys.stderr)
        return 130


def _eval(args: argparse.Namespace) -> int:
    if not args.candidate.is_file():
        print(f"kernel-code: error: candidate file {args.candidate} does not exist", file=sys.stderr)
        return 2
    problem = load_problem(args.reference, kernelbench=args.kernelbench)
    config = EvalConfig(
        device=args.device,
        backend=args.backend,
        size=args.size,
        timeout_s=args.timeout,
        trials=args.trials,
        samples=args.samples,
        compile_baseline=args.compile_baseline,
        size_overrides=tuple(args.overrides),
        hardware=args.hardware,
    )
    result = evaluate_candidate(problem, args.candidate, config)
    diagnosis = _diagnose(result, config)
    if args.json:
        sys.stdout.write(json.dumps({**result.to_json(), "diagnosis": diagnosis.to_json()}) + "\n")
    else:
        from kernel_code.render import print_diagnosis, print_result

        print_result(result)
        print_diagnosis(diagnosis)
    return 0


def _diagnose(result: EvalResult, config: EvalConfig) -> Diagnosis:
    """The rule-based critic's view of this one result (no history: there is no previous best)."""
    ops = [rule.op for rule in result.profile.flop_count.by_rule] if result.profile is not None else []
    classes = op_classes_of(ops) or ("any",)
    return RuleCritic().critique(snapshot_of(result, iteration=0), None, classes, backend=config.backend)
