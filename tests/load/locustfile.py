"""Locust scenario for priorart: analysts searching documents and passages in en/de/fr.

Queries are drawn from the served index itself (``$PRIORART_LOAD_INDEX``, the index folder): title +
the start of the first claim in the document's languages (the EP grants give German and French
claims), and publication numbers (query-by-document). Every response is checked, not just its status.

Run by ``tests/load/test_load.py``; by hand::

    PRIORART_LOAD_INDEX=INDEX_DIR locust -f tests/load/locustfile.py --headless -u 20 -r 10 -t 30s \\
        --host http://127.0.0.1:8000 --csv out/load --exit-code-on-error 1

``$PRIORART_LOAD_WAIT`` ("min,max" seconds, default "0.5,2.0") is each user's think time between requests.
``$PRIORART_LOAD_GENERATIONS`` (a file): every response must carry the index ``generation`` it was answered
from (live index, issue 18); at the end the count of responses per generation and per request name, and
locust's request and failure totals, are written there as JSON (``tests/load/test_load.py`` reads it), with the
answers marked ``partial`` (a sharded index with a shard down, issue 15; such an answer must name its missing
shards in ``missing_shards`` and its notices, else it counts as a failure) per request name and per missing shard.
``$PRIORART_LOAD_INDEX`` may be a sharded index (queries from every shard's records).
``$PRIORART_LOAD_SEARCH_BODY`` (a JSON object): fields sent in every ``/search`` body besides the query's, e.g.
``{"evidence_docs": 0}``: the same code under another request setting (``priorart-lab bench load --compare-settings``).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

from locust import HttpUser, between, events, task

SEED = int(os.environ.get("PRIORART_LOAD_SEED", "13"))
WAIT = tuple(float(x) for x in os.environ.get("PRIORART_LOAD_WAIT", "0.5,2.0").split(","))
LANGS = ("en", "de", "fr")
POOL: dict[str, list[str]] = {"en": [], "de": [], "fr": [], "pubno": []}
GENERATIONS_OUT = os.environ.get("PRIORART_LOAD_GENERATIONS")
GENERATIONS: Counter[tuple[int, str]] = Counter()  # (generation, request name) of every checked response
PARTIAL: Counter[str] = Counter()  # missing shard -> partial answers that named it
PARTIAL_ANSWERS: Counter[str] = Counter()  # request name -> answers marked partial
STATE: dict[str, Any] = {}


def search_body(raw: str | None) -> dict[str, Any]:
    """The extra ``/search`` fields of ``$PRIORART_LOAD_SEARCH_BODY`` (a JSON object; none when unset or empty)."""
    extra = json.loads(raw) if raw else {}
    if not isinstance(extra, dict):
        raise RuntimeError(f"PRIORART_LOAD_SEARCH_BODY must be a JSON object, got {raw!r}")
    return extra


SEARCH_BODY = search_body(os.environ.get("PRIORART_LOAD_SEARCH_BODY"))


def build_pool(index_dir: Path, *, seed: int = SEED) -> dict[str, list[str]]:
    """Realistic queries from the index's doc store: per language title + 20-80 words of claim 1; ids."""
    rng = random.Random(seed)
    pool: dict[str, list[str]] = {"en": [], "de": [], "fr": [], "pubno": []}
    # an index folder's records, or a sharded index's (shards/shard-NNN/docs.jsonl, issue 15)
    stores = [index_dir / "docs.jsonl"] if (index_dir / "docs.jsonl").is_file() else \
        sorted(index_dir.glob("shards/shard-*/docs.jsonl"))
    if not stores:
        raise RuntimeError(f"no docs.jsonl in {index_dir} (nor in its shards)")
    for store in stores:
        with store.open(encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                pool["pubno"].append(rec["id"])
                for lang in LANGS:
                    claims = rec.get("claims", {}).get(lang) or []
                    title = rec.get("title", {}).get(lang)
                    if not claims or not title:
                        continue
                    words = claims[0]["text"].split()
                    pool[lang].append(f"{title}. {' '.join(words[:rng.randint(20, 80)])}")
    for lang in LANGS:
        if not pool[lang]:
            raise RuntimeError(f"no {lang} claims in {index_dir}: cannot draw {lang} queries")
    return pool


@events.init.add_listener
def _init(environment: Any, **_: Any) -> None:
    index_dir = os.environ.get("PRIORART_LOAD_INDEX")
    if not index_dir:
        raise RuntimeError("set PRIORART_LOAD_INDEX to the index folder the service serves (queries come from it)")
    POOL.update(build_pool(Path(index_dir)))
    STATE["environment"] = environment


@events.quit.add_listener
def _write_generations(**_: Any) -> None:
    """After the last request: responses per generation (and request name) and locust's totals, as JSON."""
    if not GENERATIONS_OUT:
        return
    by_gen: Counter[int] = Counter()
    for (gen, _name), n in GENERATIONS.items():
        by_gen[gen] += n
    per_name: dict[str, dict[str, int]] = {}
    for (gen, name), n in sorted(GENERATIONS.items()):
        per_name.setdefault(name, {})[str(gen)] = n
    total = STATE["environment"].stats.total
    Path(GENERATIONS_OUT).write_text(json.dumps({
        "requests": total.num_requests,
        "failures": total.num_failures,
        "by_generation": {str(g): n for g, n in sorted(by_gen.items())},
        "by_generation_and_request": per_name,
        "partial_by_missing_shard": dict(PARTIAL),
        "partial": sum(PARTIAL_ANSWERS.values()),
        "partial_by_request": dict(PARTIAL_ANSWERS),
    }, indent=1), encoding="utf-8")


class Analyst(HttpUser):
    """One analyst: mostly document searches (en > de = fr), some by publication number, some passages."""

    wait_time = between(WAIT[0], WAIT[1])

    def on_start(self) -> None:
        self.rng = random.Random(SEED + id(self))

    def _post(self, path: str, name: str, body: dict[str, Any], check: Any = None) -> None:
        with self.client.post(path, json=body, name=name, timeout=30, catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:300]}")
                return
            try:
                data = resp.json()
            except ValueError:
                resp.failure(f"not JSON: {resp.text[:200]}")
                return
            if not isinstance(data.get("results"), list):
                resp.failure(f"no results list in {str(data)[:200]}")
                return
            generation = data.get("generation")
            if not isinstance(generation, int):
                resp.failure(f"no generation in {str(data)[:200]}")
                return
            GENERATIONS[(generation, name)] += 1
            if data.get("partial"):  # a sharded index with a shard down (issue 15): it must say which
                missing = data.get("missing_shards") or []
                notices = " ".join(str(n) for n in data.get("notices", []))
                if not missing or not all(m in notices for m in missing):
                    resp.failure(f"partial answer that does not name its missing shards: {missing}")
                    return
                PARTIAL.update(missing)
                PARTIAL_ANSWERS[name] += 1
            problem = check(data) if check else None
            if problem:
                resp.failure(problem)
            else:
                resp.success()

    def _query(self, lang: str) -> str:
        return self.rng.choice(POOL[lang])

    @task(5)
    def search_en(self) -> None:
        self._post("/search", "/search [en]", {"query": self._query("en"), "k": 20, "explain": True, **SEARCH_BODY})

    def _search_lang(self, lang: str) -> None:
        def check(d: dict[str, Any]) -> str | None:
            seen = d["query"].get("lang")
            return None if seen == lang else f"{lang} query read as {seen}"

        self._post("/search", f"/search [{lang}]", {"query": self._query(lang), "lang": "auto", "k": 20,
                                                    "explain": True, **SEARCH_BODY}, check)

    @task(2)
    def search_de(self) -> None:
        self._search_lang("de")

    @task(2)
    def search_fr(self) -> None:
        self._search_lang("fr")

    @task(2)
    def search_by_publication_number(self) -> None:
        pub = self._query("pubno")

        def check(d: dict[str, Any]) -> str | None:
            if d["query"].get("text_from") != pub:
                return f"{pub} not taken as a publication number: {d['query'].get('text_from')}"
            if any(h["id"] == pub for h in d["results"]):
                return f"{pub} found itself"
            return None

        self._post("/search", "/search [pubno]", {"query": pub, "k": 20, **SEARCH_BODY}, check)

    @task(3)
    def passages(self) -> None:
        lang = self.rng.choice(("en", "en", "en", "de", "fr"))
        self._post("/passages", f"/passages [{lang}]", {"query": self._query(lang), "k": 10},
                   lambda d: None if all(p["section_path"] and p["text"] for p in d["results"])
                   else "passage without section path or text")
