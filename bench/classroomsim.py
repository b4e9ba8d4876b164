"""A class answering through the class store: students join, answer every item, and the
store keeps every answer exactly once while a replica dies and the database restarts.

    python -m bench.classroomsim [--students 60] [--replicas 2] [--items 10] [--db postgres]
                                 [--kill-after 8] [--restart-db-after 16] [--json out.json]
    python -m bench.classsim --class-store ...     # the same, from the class simulation

Each replica is a process of its own (as `make serve` runs them) holding its students as
threads. A student joins with a name, then for every item: thinks 0.3–1.5 s, records the item
as their position (what resumes them) and submits, wrong first for some items, exactly as the
class page calls ``Classroom``; every submit is timed from the call to its feedback (the
answer is committed by then). While the database does not answer (``StoreUnavailableError``)
the student is shown "saving … trying again" (counted here) and resends the same
submission_id after a pause, as the page does.

``--kill-after``: replica r1 is SIGKILLed; its students come back on a fresh process with only
their personal key, read their position and progress from the store and go on from there.
``--restart-db-after``: PostgreSQL is stopped and started again (``pg_ctl restart``).

Checks at the end: every planned answer is stored exactly once (by submission id), ``results``
agrees with the plan cell by cell, and each resumed student restarted at the item they were on.
What is not measured here: the Streamlit websocket between browser and replica (bench.classsim
without --class-store does that); these figures are the store's share of a submit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import signal
import tempfile
import threading
import time
from pathlib import Path

from bench.classcore import account, summary

THINK_S = (0.3, 1.5)
RETRY_PAUSE_S = 0.5


def plan(student: int, item: int) -> list[str]:
    """What a student sends on an item: right at once, wrong then right, or wrong twice."""
    return [["right"], ["wrong", "right"], ["right"], ["wrong", "wrong"]][(student + item) % 4]


def _answer(ex, what: str, n: int):
    if what == "right":
        return ex.answer
    return ex.wrong[n % len(ex.wrong)].answer


def _student(room, name: str, key: str, n_items: int, out, rng: random.Random) -> None:
    from classroom import StoreUnavailableError

    number = int(name.split("-")[1])
    done = {s.index: s.attempts for s in _retrying(room.progress, key)}
    for item in range(n_items):
        steps = plan(number, item)
        if done.get(item, 0) >= len(steps):
            continue
        _retrying(room.set_position, key, item)
        ex = _retrying(room.exercise, key, item)
        for n in range(done.get(item, 0), len(steps)):
            time.sleep(rng.uniform(*THINK_S))
            sid = f"{name}:{item}:{n}"
            answer = _answer(ex, steps[n], n)
            start, retries = time.perf_counter(), 0
            first_try_s = None
            while True:
                t0 = time.perf_counter()
                try:
                    fb = room.submit(key, item, answer, submission_id=sid)
                    break
                except StoreUnavailableError:
                    retries += 1  # the page shows "saving … trying again"
                    time.sleep(RETRY_PAUSE_S)
            if retries == 0:
                first_try_s = time.perf_counter() - t0
            out.put(
                {
                    "name": name,
                    "sid": sid,
                    "correct": fb.correct,
                    "expected": steps[n] == "right",
                    "seconds": time.perf_counter() - start,
                    "first_try_s": first_try_s,
                    "retries": retries,
                }
            )
    out.put({"name": name, "finished": True})


def _retrying(fn, *args):
    from classroom import StoreUnavailableError

    for _ in range(120):
        try:
            return fn(*args)
        except StoreUnavailableError:
            time.sleep(RETRY_PAUSE_S)
    return fn(*args)


def replica(url: str, code: str, names: list[str], keys: dict, n_items: int, out, seed: int):
    """One replica process: joins its new students (keys None) and runs them all."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from classroom import Classroom

    room = Classroom(url)
    threads = []
    for name in names:
        key = keys.get(name)
        if key is None:
            key = _retrying(room.join, code, name)
            out.put({"name": name, "key": key})
        else:
            out.put({"name": name, "resumed_at": room.student(key).position})
        rng = random.Random(f"{seed}:{name}")
        th = threading.Thread(target=_student, args=(room, name, key, n_items, out, rng))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()


def simulate(
    students: int = 60,
    replicas: int = 2,
    n_items: int = 10,
    db: str = "postgres",
    kill_after_s: float | None = None,
    restart_db_after_s: float | None = None,
    seed: int = 0,
    deadline_s: float = 600.0,
) -> dict:
    from classroom import Classroom
    from deploy import postgres

    with contextlib.ExitStack() as stack:
        server = None
        if db == "postgres":
            server = stack.enter_context(postgres.temporary())
            url = server.url
        else:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="lab-class-"))
            url = f"sqlite:///{Path(folder) / 'classes.sqlite'}"
        room = Classroom(url)
        code, teacher_key = room.create_class("bench", seed=seed, n_items=n_items)
        ctx = multiprocessing.get_context("spawn")
        names = [f"s-{i}" for i in range(students)]
        groups = {f"r{r + 1}": names[r::replicas] for r in range(replicas)}
        # One queue per process: a replica killed mid-write can only break its own queue.
        queues = {r: ctx.Queue() for r in groups}
        procs = {
            r: ctx.Process(target=replica, args=(url, code, group, {}, n_items, queues[r], seed))
            for r, group in groups.items()
        }
        start = time.perf_counter()
        for p in procs.values():
            p.start()
        keys, records, finished, resumed = {}, [], set(), {}
        killed = restarted = False
        position_at_kill: dict[str, int] = {}
        outage_s = None
        class_start = None  # once every student has joined: the kill and restart count from it
        while len(finished) < students and time.perf_counter() - start < deadline_s:
            if class_start is None and len(keys) == students:
                class_start = time.perf_counter()
            now = -1.0 if class_start is None else time.perf_counter() - class_start
            if kill_after_s is not None and not killed and now >= kill_after_s >= 0:
                os.kill(procs["r1"].pid, signal.SIGKILL)
                procs["r1"].join()
                del queues["r1"]
                killed = True
                lost = [n for n in groups["r1"] if n not in finished and n in keys]
                for n in lost:
                    position_at_kill[n] = _retrying(room.student, keys[n]).position
                queues["r1-back"] = ctx.Queue()
                back = ctx.Process(
                    target=replica,
                    args=(
                        url,
                        code,
                        lost,
                        {n: keys[n] for n in lost},
                        n_items,
                        queues["r1-back"],
                        seed + 1,
                    ),
                )
                back.start()
                procs["r1-back"] = back
            if (
                server is not None
                and restart_db_after_s is not None
                and not restarted
                and now >= restart_db_after_s >= 0
            ):
                t0 = time.perf_counter()
                server.restart()
                outage_s = time.perf_counter() - t0
                restarted = True
            got = False
            for q in list(queues.values()):
                while True:
                    try:
                        msg = q.get_nowait()
                    except Exception:  # noqa: BLE001 - empty (or a killed writer's leftovers)
                        break
                    got = True
                    if "key" in msg:
                        keys[msg["name"]] = msg["key"]
                    elif "resumed_at" in msg:
                        resumed[msg["name"]] = msg["resumed_at"]
                    elif msg.get("finished"):
                        finished.add(msg["name"])
                    else:
                        records.append(msg)
            if not got:
                time.sleep(0.1)
        for p in procs.values():
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        wall_s = time.perf_counter() - start

        planned = {
            f"{n}:{i}:{k}"
            for n in names
            for i in range(n_items)
            for k in range(len(plan(int(n[2:]), i)))
        }
        with room.engine.connect() as conn:
            from sqlalchemy import text

            stored = [
                f"{name}:{sid}".split(":", 1)[1]
                for name, sid in conn.execute(
                    text(
                        "SELECT st.name, s.submission_id FROM submissions s"
                        " JOIN students st ON st.id = s.student_id JOIN classes c"
                        " ON c.id = s.class_id WHERE c.code = :c"
                    ),
                    {"c": code},
                )
            ]
        df = room.results(code, teacher_key)
        cells_ok = all(
            row.attempts == len(plan(int(row.name[2:]), row.index))
            and row.correct == ("right" in plan(int(row.name[2:]), row.index))
            for row in df.itertuples()
        )
        first = [r["first_try_s"] for r in records if r["first_try_s"] is not None]
        return {
            "db": db,
            "students": students,
            "replicas": replicas,
            "items": n_items,
            "wall_s": round(wall_s, 1),
            "finished": len(finished),
            **account(planned, stored),
            "results_exact": cells_ok and len(df) == students * n_items,
            "wrong_feedback": sum(r["correct"] != r["expected"] for r in records),
            "submit_s": summary(first),
            "submit_with_retries_s": summary([r["seconds"] for r in records]),
            "saw_retrying": sum(r["retries"] > 0 for r in records),
            "killed_replica": killed,
            "resumed_students": len(resumed),
            "resumed_at_their_item": sum(resumed.get(n) == p for n, p in position_at_kill.items()),
            "db_restarted": restarted,
            "db_restart_s": None if outage_s is None else round(outage_s, 2),
        }


def describe(r: dict) -> str:
    s, w = r["submit_s"], r["submit_with_retries_s"]
    lines = [
        f"{r['students']} students, {r['replicas']} replicas, {r['items']} items on {r['db']}: "
        f"{r['finished']} finished in {r['wall_s']} s",
        f"submit→feedback: p50 {s.get('p50_s', 0) * 1000:.0f} ms, p95 {s.get('p95_s', 0) * 1000:.0f} ms,"
        f" max {s.get('max_s', 0) * 1000:.0f} ms (n={s.get('n', 0)}); with retries p95 "
        f"{w.get('p95_s', 0) * 1000:.0f} ms, max {w.get('max_s', 0) * 1000:.0f} ms",
        f"answers: planned {r['answers_planned']}, stored {r['answers_stored']}, lost "
        f"{r['lost']}, duplicated {r['duplicates']}, results exact: {r['results_exact']}",
    ]
    if r["killed_replica"]:
        lines.append(
            f"replica r1 killed: {r['resumed_students']} students resumed elsewhere, "
            f"{r['resumed_at_their_item']} at their item"
        )
    if r["db_restarted"]:
        lines.append(
            f"PostgreSQL restarted ({r['db_restart_s']} s): {r['saw_retrying']} answers showed "
            "'saving … trying again', none lost"
            if r["lost"] == 0
            else f"PostgreSQL restarted: {r['lost']} answers LOST"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--kill-after", type=float, default=None)
    parser.add_argument("--restart-db-after", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = simulate(
        args.students,
        args.replicas,
        args.items,
        args.db,
        args.kill_after,
        args.restart_db_after,
        args.seed,
    )
    print(describe(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
