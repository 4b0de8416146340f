"""The replay generator: a real session recorded on the CPU (an honest kernel, a broken one, a reply
without code), then replayed through the loop with the real evaluator."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from openkernel.errors import ConfigError
from openkernel.events import (
    Decision,
    EvaluationFinished,
    Event,
    GeneratorDelta,
    KernelProposed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
)
from openkernel.generate.base import Context, Proposal
from openkernel.generate.replay import (
    RecordedKernel,
    Recording,
    ReplayGenerator,
    ReplayRow,
    compare,
    device_warning,
    find_session,
    read_recording,
)
from openkernel.loop import optimize
from openkernel.problems import load_problem
from openkernel.store import DirectoryStore
from tests.recorded import BROKEN, HONEST, fast_evaluator, record

CPU = "cpu (Triton interpreter)"
FINISHED = "replay finished: 2 recorded kernels re-evaluated (1 iteration without a kernel skipped)"


@dataclass(frozen=True)
class Replayed:
    recorded_dir: Path
    recorded: list[Event]
    replay_dir: Path
    replayed: list[Event]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    root = tmp_path_factory.mktemp("replay")
    recorded = record(root / "recorded")
    generator = ReplayGenerator(root / "recorded")
    config = SessionConfig("triton", f"replay:{root / 'recorded'}", "small", None, None, None, None)
    store = DirectoryStore.create_at(root / "replay", "softmax_fp32", config)
    evaluator = fast_evaluator(root / "cache")
    replayed = list(optimize(load_problem("softmax_fp32"), generator, evaluator, store, config))
    return Replayed(root / "recorded", recorded, root / "replay", replayed)


def _results(events: list[Event]) -> list[dict[str, object]]:
    return [e.result_json for e in events if isinstance(e, EvaluationFinished)]


def _float(value: object) -> float:
    assert isinstance(value, float)
    return value


def test_the_recording_holds_the_kernels_and_their_figures(replayed: Replayed) -> None:
    first, second = _results(replayed.recorded)
    assert (first["status"], second["status"]) == ("correct", "compile_error")  # what was recorded
    started = replayed.recorded[0]
    assert isinstance(started, SessionStarted)
    recording = read_recording(replayed.recorded_dir)
    assert recording == Recording(
        path=replayed.recorded_dir,
        session_id="recorded",
        problem_name="softmax_fp32",
        problem_path=started.problem_path,
        backend="triton",
        size="small",
        device=CPU,
        kernels=(
            RecordedKernel(0, "one row per program", "kernels/iter_0000.py", HONEST, "correct",
                           _float(first["runtime_ms"]), _float(first["speedup"])),
            RecordedKernel(1, "forgot a parenthesis", "kernels/iter_0001.py", BROKEN, "compile_error", None, None),
        ),
        without_kernel=(2,),
    )  # fmt: skip
    assert recording.summary() == "2 recorded kernels; 1 iteration without a kernel skipped (#2)"


def test_the_replay_re_evaluates_the_same_bytes_and_ends_itself(replayed: Replayed) -> None:
    events = replayed.replayed
    assert [e.kind for e in events] == [
        "session_started",
        *["iteration_started", "generator_delta", "kernel_proposed", "evaluation_finished", "diagnosis_made",
          "decision"] * 2,
        "session_finished",
    ]  # fmt: skip
    proposed = [e for e in events if isinstance(e, KernelProposed)]
    assert [(p.iteration, p.intent) for p in proposed] == [
        (0, "replay #0: one row per program"),
        (1, "replay #1: forgot a parenthesis"),
    ]
    recorded = [e for e in replayed.recorded if isinstance(e, KernelProposed)]
    assert [p.source_sha256 for p in proposed] == [r.source_sha256 for r in recorded]
    assert [(replayed.replay_dir / p.kernel_file).read_text() for p in proposed] == [HONEST, BROKEN]
    assert [r["status"] for r in _results(events)] == [r["status"] for r in _results(replayed.recorded)]
    assert [(d.iteration, d.decision) for d in events if isinstance(d, Decision)] == [(0, "keep"), (1, "error")]
    deltas = [e.text for e in events if isinstance(e, GeneratorDelta)]
    assert deltas == [
        "kernel of iteration 0 of session recorded (kernels/iter_0000.py)",
        "kernel of iteration 1 of session recorded (kernels/iter_0001.py)",
    ]
    finished = events[-1]
    assert isinstance(finished, SessionFinished)
    assert (finished.reason, finished.iterations, finished.best_iteration) == (FINISHED, 2, 0)
    assert DirectoryStore.open(replayed.replay_dir).read_events().events == tuple(events)


def test_compare_lines_up_recorded_and_new_figures(replayed: Replayed) -> None:
    recording = read_recording(replayed.recorded_dir)
    old, _ = _results(replayed.recorded)
    new, _ = _results(replayed.replayed)
    old_ms, new_ms = _float(old["runtime_ms"]), _float(new["runtime_ms"])
    honest = ReplayRow(0, "one row per program", "correct", old_ms, _float(old["speedup"]), "correct", new_ms,
                       _float(new["speedup"]), (new_ms - old_ms) / old_ms * 100.0)  # fmt: skip
    broken = ReplayRow(1, "forgot a parenthesis", "compile_error", None, None, "compile_error", None, None, None)
    assert compare(recording, replayed.replayed) == (honest, broken)
    # Part way through (the second kernel not yet evaluated): its new figures are blank.
    first_decision = next(i for i, e in enumerate(replayed.replayed) if isinstance(e, Decision))
    pending = ReplayRow(1, "forgot a parenthesis", "compile_error", None, None, None, None, None, None)
    assert compare(recording, replayed.replayed[: first_decision + 1]) == (honest, pending)
    # Re-timed on another device: both times are shown, the change is not worked out.
    started = replayed.replayed[0]
    assert isinstance(started, SessionStarted)
    elsewhere = [dataclasses.replace(started, device="cuda:0 (NVIDIA H200)"), *replayed.replayed[1:]]
    assert compare(recording, elsewhere) == (dataclasses.replace(honest, runtime_change_pct=None), broken)


def test_kernel_i_is_proposed_for_iteration_i_so_a_resume_agrees(replayed: Replayed) -> None:
    generator = ReplayGenerator(replayed.recorded_dir)
    context = Context(1, "softmax_fp32", "", "triton", None, None, (), None, None, (), None)
    text = "kernel of iteration 1 of session recorded (kernels/iter_0001.py)"
    seen: list[str] = []
    assert generator.propose(context, seen.append) == Proposal(
        BROKEN, "replay #1: forgot a parenthesis", text, None, None
    )
    assert seen == [text]
    assert [generator.exhausted(i) for i in (0, 1, 2, 3)] == [None, None, FINISHED, FINISHED]


def test_a_replay_must_fit_the_problem_and_backend(replayed: Replayed) -> None:
    generator = ReplayGenerator(replayed.recorded_dir)
    generator.check_fits("softmax_fp32", "triton")
    with pytest.raises(ConfigError) as caught:
        generator.check_fits("matmul_fp32", "triton")
    assert str(caught.value) == (
        "session recorded was recorded on problem 'softmax_fp32', not 'matmul_fp32': "
        f"run `kernel-code replay {replayed.recorded_dir}`, or name that problem"
    )
    with pytest.raises(ConfigError) as caught:
        generator.check_fits("softmax_fp32", "cuda")
    assert str(caught.value) == "session recorded was recorded with --backend triton: pass --backend triton"


def test_device_warning() -> None:
    assert device_warning(CPU, CPU) is None
    assert device_warning("cuda:0 (NVIDIA H200)", CPU) == (
        "recorded on cuda:0 (NVIDIA H200), re-timed on cpu (Triton interpreter): times are not comparable"
    )


# --- sessions that cannot be replayed -----------------------------------------------------------


def test_a_missing_session_says_where_to_look(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        find_session("20990101-000000-nope-0000", tmp_path)
    assert str(caught.value) == (
        "no recorded session '20990101-000000-nope-0000': pass a session directory, or a session id that "
        f"`kernel-code sessions` lists (under {tmp_path})"
    )
    (tmp_path / "s1").mkdir()
    assert find_session("s1", tmp_path) == tmp_path / "s1"
    assert find_session(str(tmp_path), tmp_path / "elsewhere") == tmp_path


def test_a_folder_that_is_no_session(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ReplayGenerator(tmp_path)
    why = f"{tmp_path} is not a kernel-code session: it has no events.jsonl"
    assert str(caught.value) == f"cannot replay {tmp_path}: {why}"


def test_a_session_without_kernels(tmp_path: Path) -> None:
    record(tmp_path / "empty", (Proposal(None, "", "no", None, "the reply had no code block"),))
    with pytest.raises(ConfigError) as caught:
        ReplayGenerator(tmp_path / "empty")
    assert str(caught.value) == (
        f"cannot replay {tmp_path / 'empty'}: it recorded no kernels (1 iteration, none with code); "
        "pick another session with `kernel-code sessions`"
    )


def test_a_kernel_changed_after_recording(replayed: Replayed, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("config.json", "events.jsonl"):
        (copy / name).write_bytes((replayed.recorded_dir / name).read_bytes())
    (copy / "kernels").mkdir()
    (copy / "kernels" / "iter_0000.py").write_text(HONEST + "# edited\n")
    with pytest.raises(ConfigError) as caught:
        ReplayGenerator(copy)
    assert str(caught.value) == (
        f"cannot replay {copy}: {copy / 'kernels' / 'iter_0000.py'} was changed after it was recorded "
        "(its SHA-256 differs), so it is not the kernel that was timed; restore it or pick another session"
    )
