"""A forfeit reported by the worker after its game ended counts in the standings at once.

The worker reports a seat's failure (``worker_game``) after the game has finished on the
server, so the standings must count it when the report arrives, not only at the next game's
end (found by tests/clients/test_ladder_hostile.py: a hostile bot that lost both games of its
only pairing by failures showed 1 forfeit of 2)."""

from __future__ import annotations

from pathlib import Path

from tests.cluster_support import until
from tests.ladder_support import GOOD, check, claim, play_pairing, submit, worker
from tests.server_support import Client, running, server_settings


async def test_forfeits_of_the_last_pairing_are_counted(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ladder_worker_key="k")) as app:
        ann = await Client.hello(app.port, "ann")
        w = await worker(app.port)
        alpha, beta = [(await submit(ann, GOOD, name=n))["bot"]["bot_id"]
                       for n in ("alpha", "beta")]
        for _ in (alpha, beta):
            await check(w, True)
        job = None
        while job is None or job["kind"] != "play":
            if job is not None:  # an eval: not computed here
                await w.request({"type": "worker_done", "job_id": job["job_id"],
                                 "reason": "not_deterministic"})
            job = await claim(w)
            if job is None:  # the scheduler pairs them within a tick, and nudges
                await w.expect(lambda m: m.get("type") == "worker_nudge")
        first = job["bots"][0]["bot_id"]
        await play_pairing(app.port, job, 0 if first == alpha else 1)  # beta loses both

        async def played() -> bool:
            rows = (await ann.request({"type": "ladder_show"}))["standings"]
            return all(r["games"] == 2 for r in rows)

        await until(played, 30, "both games in the standings")
        for n, match_id in enumerate(job["matches"]):
            for seat in (0, 1):
                report = {"type": "worker_game", "job_id": job["job_id"],
                          "match_id": match_id, "seat": seat, "stderr": ""}
                if job["bots"][seat if n == 0 else 1 - seat]["bot_id"] == beta:
                    report["failure"] = "crash: the program exited (code 1)"
                await w.request(report)
        await w.request({"type": "worker_done", "job_id": job["job_id"]})
        rows = {r["bot"]: r for r in (await ann.request({"type": "ladder_show"}))["standings"]}
        assert (rows["beta"]["losses"], rows["beta"]["forfeits"]) == (2, 2), rows["beta"]
        page = await ann.request({"type": "ladder_page", "bot_id": beta})
        assert page["forfeits"] == 2, page
