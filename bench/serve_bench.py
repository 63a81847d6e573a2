#!/usr/bin/env python3
"""The serving benchmark of bench/serve-bench.mjs, for machines without Node
(the H200 machine has python3 but no node): the same options, loads,
definitions and receipt, Python 3 standard library only (one thread a
client, http.client with keep-alive). bench/README.md describes both;
tests/server/serve-bench-check.mjs checks both against the same mock server.

    python3 bench/serve_bench.py --url http://127.0.0.1:8080 -c 8 -P 128 -D 128 -n 64 -o receipt.json

`--help` lists the options (those of serve-bench.mjs).
"""
import http.client
import json
import math
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone

USAGE = """usage: python3 bench/serve_bench.py --url URL [options]
  the options of bench/serve-bench.mjs: --url --endpoint --model --api-key -c -P -D -n --duration
  --rate --warmup --prompt-mode --token-range --multi-turn --turn-tokens --timeout --seed --label -o
"""

WORDS = ("the of and to in is was for on that with as by at from his her he she it they we you "
         "one two three time day year way man world life hand part child eye place work week case point "
         "house water room mother area money story fact month lot right study book word business issue "
         "side kind head far black long both little great old big high small large next early young few "
         "public bad same able last late hard major better best ready light dark green blue red white").split(" ")

T_START = time.perf_counter()


def now_ms():
    return (time.perf_counter() - T_START) * 1000.0


def die(msg):
    sys.stderr.write(f"serve-bench: {msg}\n")
    sys.exit(2)


def log(msg):
    sys.stderr.write(f"serve-bench: {msg}\n")
    sys.stderr.flush()


# ---- options ---------------------------------------------------------------------
def parse_args(argv):
    o = dict(url="http://127.0.0.1:8080", endpoint="completions", model=None, api_key=None, concurrency=1,
             prompt_tokens=128, max_tokens=128, num_requests=None, duration=None, rate=None, warmup=0,
             prompt_mode="auto", token_lo=1000, token_hi=4000, multi_turn=None, turn_tokens=64, timeout=600.0,
             seed=1, label=None, output=None)

    def num(name, v, lo, integer=False):
        try:
            x = float(v)
        except (TypeError, ValueError):
            die(f"{name} needs a number >= {lo}, got '{v if v is not None else ''}'")
        if not math.isfinite(x) or x < lo:
            die(f"{name} needs a number >= {lo}, got '{v}'")
        if integer:
            if x != int(x):
                die(f"{name} needs an integer, got '{v}'")
            return int(x)
        return x

    i = 0
    while i < len(argv):
        a = argv[i]
        v = argv[i + 1] if i + 1 < len(argv) else None

        def take():
            nonlocal i
            i += 1
            if v is None:
                die(f"{a} needs a value")
            return v
        if a == "--url":
            o["url"] = take().rstrip("/")
        elif a == "--endpoint":
            o["endpoint"] = take()
            if o["endpoint"] not in ("completions", "chat"):
                die("--endpoint is completions or chat")
        elif a == "--model":
            o["model"] = take()
        elif a == "--api-key":
            o["api_key"] = take()
        elif a in ("-c", "--concurrency"):
            o["concurrency"] = num(a, take(), 1, True)
        elif a in ("-P", "--prompt-tokens"):
            o["prompt_tokens"] = num(a, take(), 1, True)
        elif a in ("-D", "--max-tokens"):
            o["max_tokens"] = num(a, take(), 1, True)
        elif a in ("-n", "--num-requests"):
            o["num_requests"] = num(a, take(), 1, True)
        elif a == "--duration":
            o["duration"] = num(a, take(), 0.001)
        elif a == "--rate":
            o["rate"] = num(a, take(), 1e-9)
        elif a == "--warmup":
            o["warmup"] = num(a, take(), 0, True)
        elif a == "--prompt-mode":
            o["prompt_mode"] = take()
            if o["prompt_mode"] not in ("ids", "text", "auto"):
                die("--prompt-mode is ids, text or auto")
        elif a == "--token-range":
            m = re.fullmatch(r"(\d+):(\d+)", take())
            if not m or int(m[1]) >= int(m[2]):
                die("--token-range is A:B with A < B")
            o["token_lo"], o["token_hi"] = int(m[1]), int(m[2])
        elif a == "--multi-turn":
            m = re.fullmatch(r"(\d+)x(\d+)", take())
            if not m or int(m[1]) < 1 or int(m[2]) < 1:
                die("--multi-turn is KxT, e.g. 8x5")
            o["multi_turn"] = {"conversations": int(m[1]), "turns": int(m[2])}
        elif a == "--turn-tokens":
            o["turn_tokens"] = num(a, take(), 1, True)
        elif a == "--timeout":
            o["timeout"] = num(a, take(), 0.001)
        elif a == "--seed":
            o["seed"] = num(a, take(), 0, True)
        elif a == "--label":
            o["label"] = take()
        elif a in ("-o", "--output"):
            o["output"] = take()
        elif a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        else:
            die(f"unknown option '{a}' (--help lists them)")
        i += 1
    if o["multi_turn"] and o["endpoint"] == "completions" and "--endpoint" in argv:
        die("--multi-turn runs on the chat endpoint")
    if o["multi_turn"]:
        o["endpoint"] = "chat"
    if o["endpoint"] == "chat" and o["prompt_mode"] == "ids":
        die("--prompt-mode ids needs --endpoint completions")
    if o["num_requests"] is None and o["duration"] is None:
        o["num_requests"] = 4 * o["concurrency"]
    u = urllib.parse.urlsplit(o["url"])
    if u.scheme not in ("http", "https") or not u.hostname:
        die(f"--url '{o['url']}' is not a URL")
    return o


# ---- HTTP ----------------------------------------------------------------------------
class Client:
    """One keep-alive connection (one a thread)."""

    def __init__(self, o):
        self.o = o
        self.u = urllib.parse.urlsplit(o["url"])
        self.conn = None

    def _connect(self):
        cls = http.client.HTTPSConnection if self.u.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(self.u.hostname, self.u.port, timeout=self.o["timeout"])

    def request(self, method, path, body=None, on_line=None):
        """-> (status, body text or None, error or None); streamed lines go to on_line."""
        headers = {"accept": "text/event-stream" if body and body.get("stream") else "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        if self.o["api_key"]:
            headers["authorization"] = f"Bearer {self.o['api_key']}"
        for attempt in (0, 1):  # a kept-alive connection the server closed is retried once, fresh
            if self.conn is None:
                self._connect()
            try:
                self.conn.request(method, self.u.path.rstrip("/") + path, body=data, headers=headers)
                resp = self.conn.getresponse()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                self.conn.close()
                self.conn = None
                if attempt == 1 or isinstance(e, TimeoutError):
                    return 0, None, str(e) or type(e).__name__
        try:
            if resp.status == 200 and on_line:
                while True:
                    line = resp.readline()
                    if not line:
                        break
                    on_line(line.decode("utf-8", "replace"))
                text = None
            else:
                text = resp.read().decode("utf-8", "replace")
            if resp.will_close:
                self.conn.close()
                self.conn = None
            return resp.status, text, None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            self.conn.close()
            self.conn = None
            return 0, None, f"response: {e or type(e).__name__}"


def error_text(status, body, err):
    if err:
        return err
    msg = (body or "")[:200]
    try:
        msg = json.loads(body)["error"]["message"] or msg
    except (ValueError, KeyError, TypeError):
        pass
    return f"HTTP {status}: {msg}".strip()


def endpoint_path(o):
    return "/v1/chat/completions" if o["endpoint"] == "chat" else "/v1/completions"


def request_body(o, model, prompt, max_tokens, stream):
    b = {"model": model, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": stream}
    if stream:
        b["stream_options"] = {"include_usage": True}
    if o["endpoint"] == "chat":
        b["messages"] = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict) else [{"role": "user", "content": prompt}]
    else:
        b["prompt"] = prompt
    return b


def chunk_piece(choice):
    """The text a chunk carries as a token arrival (see serve-bench.mjs), or None."""
    if not isinstance(choice, dict):
        return None
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    if not isinstance(text, str):
        return None
    if text == "" and (choice.get("finish_reason") is not None or (isinstance(delta, dict) and delta.get("role"))):
        return None
    return text


def stream_one(client, o, model, prompt, max_tokens):
    rec = {"send_ms": now_ms(), "first_ms": None, "end_ms": None, "chunk_ms": [], "tokens": 0, "usage": None,
           "text": "", "error": None, "finish_reason": None}
    state = {"data": [], "malformed": None}
    pieces = []

    def on_data(data):
        if data == "[DONE]":
            return
        try:
            j = json.loads(data)
        except ValueError:
            state["malformed"] = f"malformed SSE data: {data[:80]}"
            return
        if isinstance(j, dict) and j.get("error"):
            e = j["error"]
            rec["error"] = f"stream error: {e.get('message') if isinstance(e, dict) else e}"
            return
        t = now_ms()
        if j.get("usage"):
            rec["usage"] = j["usage"]
        choices = j.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if isinstance(choice, dict) and choice.get("finish_reason"):
            rec["finish_reason"] = choice["finish_reason"]
        piece = chunk_piece(choice)
        if piece is None:
            return
        if rec["first_ms"] is None:
            rec["first_ms"] = t
        rec["chunk_ms"].append(t)
        pieces.append(piece)

    def on_line(line):  # SSE: data lines accumulate until a blank line ends the event
        line = line.rstrip("\r\n")
        if line == "":
            if state["data"]:
                on_data("\n".join(state["data"]))
                state["data"] = []
        elif line.startswith("data:"):
            state["data"].append(line[5:][1:] if line[5:].startswith(" ") else line[5:])

    status, body, err = client.request("POST", endpoint_path(o), request_body(o, model, prompt, max_tokens, True), on_line)
    if state["data"]:
        on_data("\n".join(state["data"]))
    rec["end_ms"] = now_ms()
    rec["text"] = "".join(pieces)
    if not rec["error"] and (err or status != 200):
        rec["error"] = error_text(status, body, err)
    if not rec["error"] and state["malformed"]:
        rec["error"] = state["malformed"]
    if not rec["error"] and rec["first_ms"] is None:
        rec["error"] = "no content chunk in the stream"
    u = rec["usage"]
    rec["tokens"] = u["completion_tokens"] if isinstance(u, dict) and isinstance(u.get("completion_tokens"), int) else len(rec["chunk_ms"])
    return rec


# ---- prompts ----------------------------------------------------------------------------
def id_prompt(o, rand, n):
    return [o["token_lo"] + int(rand.random() * (o["token_hi"] - o["token_lo"])) for _ in range(n)]


def text_of_words(rand, n):
    return " ".join(WORDS[int(rand.random() * len(WORDS))] for _ in range(n))


def shuffled_text(text, rand):
    """The calibration's words with all but the first shuffled (see serve-bench.mjs)."""
    w = text.split(" ")
    rest = w[1:]
    rand.shuffle(rest)
    return " ".join(w[:1] + rest)


def prompt_tokens_of(client, o, model, prompt):
    status, body, err = client.request("POST", endpoint_path(o), request_body(o, model, prompt, 1, False))
    if status != 200:
        raise RuntimeError(error_text(status, body, err))
    try:
        n = json.loads(body)["usage"]["prompt_tokens"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError("response has no usage.prompt_tokens")
    if not isinstance(n, int):
        raise RuntimeError("response has no usage.prompt_tokens")
    return n


def calibrate_words(client, o, model, target, seed):
    words, best, tries, seen = max(1, round(target * 0.75)), None, 0, set()
    while tries < 12 and words not in seen:
        seen.add(words)
        text = text_of_words(random.Random(seed), words)
        prompt = [{"role": "user", "content": text}] if o["endpoint"] == "chat" else text
        tokens = prompt_tokens_of(client, o, model, prompt)
        tries += 1
        if best is None or abs(tokens - target) < abs(best["tokens"] - target):
            best = {"words": words, "tokens": tokens}
        if tokens == target:
            break
        ratio = tokens / words
        nxt = words + round((target - tokens) / max(ratio, 0.1))
        if nxt == words:
            nxt += 1 if tokens < target else -1
        words = max(1, nxt)
    return {**best, "tries": tries}


# ---- statistics ---------------------------------------------------------------------------
def percentile(s, p):
    x = p / 100 * (len(s) - 1)
    lo, hi = math.floor(x), math.ceil(x)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


def stats(values):
    s = sorted(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if not s:
        return {"n": 0, "mean": None, "min": None, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    r = lambda v: round(v, 3)
    return {"n": len(s), "mean": r(sum(s) / len(s)), "min": r(s[0]), "p50": r(percentile(s, 50)), "p90": r(percentile(s, 90)),
            "p95": r(percentile(s, 95)), "p99": r(percentile(s, 99)), "max": r(s[-1])}


def latency_stats(recs):
    ok = [r for r in recs if not r["error"]]
    itl = [b - a for r in ok for a, b in zip(r["chunk_ms"], r["chunk_ms"][1:])]
    return {"ttft_ms": stats([r["first_ms"] - r["send_ms"] for r in ok]),
            "tpot_ms": stats([(r["end_ms"] - r["first_ms"]) / (r["tokens"] - 1) for r in ok if r["tokens"] > 1]),
            "itl_ms": stats(itl), "e2el_ms": stats([r["end_ms"] - r["send_ms"] for r in ok])}


def error_summary(recs):
    counts = {}
    for r in recs:
        if r["error"]:
            counts[r["error"]] = counts.get(r["error"], 0) + 1
    return [{"message": m, "count": c} for m, c in sorted(counts.items(), key=lambda kv: -kv[1])[:10]]


def load_receipt(recs):
    ok = [r for r in recs if not r["error"]]
    start = min((r["send_ms"] for r in recs), default=0)
    end = max((r["end_ms"] for r in recs), default=0)
    seconds = (end - start) / 1000
    tokens = sum(r["tokens"] for r in ok)
    finish = {}
    for r in ok:
        k = r["finish_reason"] or "none"
        finish[k] = finish.get(k, 0) + 1
    return {
        "requests": {"sent": len(recs), "completed": len(ok), "failed": len(recs) - len(ok)},
        "errors": error_summary(recs),
        "duration_s": round(seconds, 4),
        "generated_tokens": tokens,
        "generated_tokens_per_request": stats([r["tokens"] for r in ok]),
        "finish_reasons": finish,
        "prompt_tokens_measured": stats([r["usage"].get("prompt_tokens") for r in ok if isinstance(r["usage"], dict)
                                         and isinstance(r["usage"].get("prompt_tokens"), int)]),
        "aggregate_output_tok_s": round(tokens / seconds, 2) if seconds > 0 else None,
        "request_throughput_per_s": round(len(ok) / seconds, 3) if seconds > 0 else None,
        **latency_stats(recs),
    }


# ---- the loads ------------------------------------------------------------------------------
class Progress:
    def __init__(self, label):
        self.label, self.lock = label, threading.Lock()
        self.done = self.failed = self.inflight = self.tokens = 0
        self.t0, self.stop = now_ms(), threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()

    def _tick(self):
        while not self.stop.wait(2.0):
            self.show()

    def show(self):
        s = (now_ms() - self.t0) / 1000
        log(f"{self.label}: {self.done} done ({self.failed} failed), {self.inflight} in flight, {self.tokens} tokens, "
            f"{self.tokens / max(s, 1e-9):.1f} tok/s, {s:.1f} s")

    def end(self):
        self.stop.set()
        self.show()


def run_load(o, model, make_prompt):
    recs, lock = [], threading.Lock()
    prog = Progress(f"C={o['concurrency']}")
    rand = random.Random(o["seed"] * 7919 + 17)
    sched = {"issued": 0, "next_arrival": 0.0}
    t0 = now_ms()

    def claim():
        with lock:
            if o["num_requests"] is not None:
                if sched["issued"] >= o["num_requests"]:
                    return None
            elif (now_ms() - t0) / 1000 >= o["duration"]:
                return None
            index = sched["issued"]
            sched["issued"] += 1
            wait = 0.0
            if o["rate"]:
                sched["next_arrival"] += -math.log(1 - rand.random()) / o["rate"] * 1000
                wait = sched["next_arrival"] - (now_ms() - t0)
            return index, make_prompt(index), wait

    def worker():
        client = Client(o)
        while True:
            c = claim()
            if c is None:
                return
            index, prompt, wait = c
            if wait > 0:
                time.sleep(wait / 1000)
            with prog.lock:
                prog.inflight += 1
            rec = stream_one(client, o, model, prompt, o["max_tokens"])
            rec["index"] = index
            with prog.lock:
                prog.inflight -= 1
                prog.done += 1
                if rec["error"]:
                    prog.failed += 1
                else:
                    prog.tokens += rec["tokens"]
            with lock:
                recs.append(rec)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(o["concurrency"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    prog.end()
    return recs


def run_multi_turn(o, model, user_words):
    K, T = o["multi_turn"]["conversations"], o["multi_turn"]["turns"]
    recs, lock = [], threading.Lock()
    prog = Progress(f"multi-turn {K}x{T}")

    def conversation(k):
        client, rand, history = Client(o), random.Random(o["seed"] * 104729 + k + 1), []
        for turn in range(1, T + 1):
            history.append({"role": "user", "content": text_of_words(rand, user_words)})
            with prog.lock:
                prog.inflight += 1
            rec = stream_one(client, o, model, list(history), o["max_tokens"])
            rec["conversation"], rec["turn"] = k, turn
            with prog.lock:
                prog.inflight -= 1
                prog.done += 1
                prog.failed += bool(rec["error"])
                prog.tokens += 0 if rec["error"] else rec["tokens"]
            with lock:
                recs.append(rec)
            if rec["error"]:
                break
            history.append({"role": "assistant", "content": rec["text"]})

    threads = [threading.Thread(target=conversation, args=(k,), daemon=True) for k in range(K)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    prog.end()
    by_turn = []
    for turn in range(1, T + 1):
        r = [x for x in recs if x["turn"] == turn]
        ok = [x for x in r if not x["error"]]
        by_turn.append({
            "turn": turn, "requests": len(r), "failed": len(r) - len(ok),
            "prompt_tokens_measured": stats([x["usage"].get("prompt_tokens") for x in ok if isinstance(x["usage"], dict)
                                             and isinstance(x["usage"].get("prompt_tokens"), int)]),
            "ttft_ms": stats([x["first_ms"] - x["send_ms"] for x in ok]),
            "tpot_ms": stats([(x["end_ms"] - x["first_ms"]) / (x["tokens"] - 1) for x in ok if x["tokens"] > 1]),
        })
    first, last = by_turn[0]["ttft_ms"]["p50"], by_turn[-1]["ttft_ms"]["p50"]
    return {**load_receipt(recs), "by_turn": by_turn,
            "last_over_first_turn_ttft_p50": round(last / first, 3) if first and last is not None else None}


# ---- main ------------------------------------------------------------------------------------------
def git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        c = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip() != ""
        return c + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        try:
            with open(os.path.join(here, "..", ".dev", "COMMIT")) as f:
                return f.read().strip() or None
        except OSError:
            return None


def write_receipt(path, receipt):
    text = json.dumps(receipt, indent=1) + "\n"
    if not path:
        sys.stdout.write(text)
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    o = parse_args(sys.argv[1:])
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    client = Client({**o, "timeout": 30})
    status, body, err = client.request("GET", "/v1/models")
    if status != 200:
        die(f"GET /v1/models: {error_text(status, body, err)}")
    try:
        models = json.loads(body)
    except ValueError:
        die("GET /v1/models: the answer is not JSON")
    model = o["model"]
    if model is None:
        try:
            model = models["data"][0]["id"]
        except (KeyError, IndexError, TypeError):
            die("GET /v1/models lists no model; name one with --model")
    client = Client(o)
    receipt = {
        "tool": "bench/serve_bench.py",
        "command": " ".join(["python3", os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "git_commit": git_commit(), "label": o["label"] or o["url"], "url": o["url"], "endpoint": endpoint_path(o),
        "model": model, "server_models": models, "started": started,
        "config": {"concurrency": o["concurrency"], "prompt_tokens": o["prompt_tokens"], "max_tokens": o["max_tokens"],
                   "ignore_eos": True, "num_requests": o["num_requests"], "duration_s": o["duration"], "request_rate": o["rate"],
                   "warmup": o["warmup"], "seed": o["seed"],
                   "multi_turn": {**o["multi_turn"], "turn_tokens": o["turn_tokens"]} if o["multi_turn"] else None},
        "definitions": "TTFT = first content chunk - send; TPOT = (end - first chunk) / (tokens - 1); ITL = gaps between content chunks; "
                       "E2EL = end - send; aggregate tok/s = generated tokens of completed requests / (last end - first send). Times in ms.",
    }
    if o["multi_turn"]:
        try:
            cal = calibrate_words(client, o, model, o["turn_tokens"], o["seed"])
        except RuntimeError as e:
            die(f"calibrating a chat turn: {e}")
        words = max(1, round(cal["words"] * o["turn_tokens"] / max(cal["tokens"], 1)))
        receipt["prompt"] = {"mode": "text", "user_turn_words": words, "calibration": cal}
        log(f"multi-turn: {o['multi_turn']['conversations']} conversations x {o['multi_turn']['turns']} turns, {words} words a user turn")
        receipt["results"] = run_multi_turn(o, model, words)
    else:
        mode, measured = o["prompt_mode"], None
        if mode != "text" and o["endpoint"] == "completions":
            try:
                measured = prompt_tokens_of(client, o, model, id_prompt(o, random.Random(o["seed"]), o["prompt_tokens"]))
                mode = "ids"
                if measured != o["prompt_tokens"]:
                    log(f"warning: a {o['prompt_tokens']}-id prompt counts as {measured} prompt tokens (a BOS token?)")
            except RuntimeError as e:
                if mode == "ids":
                    die(f"the server does not take token-id prompts: {e}")
                log(f"token-id prompts refused ({e}); calibrating text")
                mode = "text"
        else:
            mode = "text"
        words = cal = None
        if mode == "text":
            try:
                cal = calibrate_words(client, o, model, o["prompt_tokens"], o["seed"])
            except RuntimeError as e:
                die(f"calibrating the prompt: {e}")
            words, measured = cal["words"], cal["tokens"]
            if measured != o["prompt_tokens"]:
                log(f"warning: closest text prompt is {measured} tokens, not {o['prompt_tokens']}")
        receipt["prompt"] = {"mode": mode, "requested_tokens": o["prompt_tokens"], "measured_tokens": measured, "words": words,
                             "calibration": cal}
        prand = random.Random(o["seed"] * 31 + 5)
        base = text_of_words(random.Random(o["seed"]), words) if mode == "text" else None
        make_prompt = (lambda i: id_prompt(o, prand, o["prompt_tokens"])) if mode == "ids" else (lambda i: shuffled_text(base, prand))
        if o["warmup"] > 0:
            log(f"warmup: {o['warmup']} requests")
            run_load({**o, "num_requests": o["warmup"], "duration": None, "rate": None}, model, make_prompt)
        log(f"load: C={o['concurrency']}, P={o['prompt_tokens']}, D={o['max_tokens']}, "
            f"{o['num_requests'] if o['num_requests'] is not None else str(o['duration']) + ' s of'} requests"
            f"{' at ' + str(o['rate']) + '/s' if o['rate'] else ''}")
        receipt["results"] = load_receipt(run_load(o, model, make_prompt))
    receipt["ended"] = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    write_receipt(o["output"], receipt)
    r = receipt["results"]
    log(f"{receipt['label']} C={o['concurrency']}: {r['requests']['completed']}/{r['requests']['sent']} ok, {r['aggregate_output_tok_s']} tok/s, "
        f"TTFT p50 {r['ttft_ms']['p50']} p95 {r['ttft_ms']['p95']} ms, TPOT p50 {r['tpot_ms']['p50']} ms")
    sys.exit(0 if r["requests"]["completed"] > 0 else 1)


if __name__ == "__main__":
    main()
