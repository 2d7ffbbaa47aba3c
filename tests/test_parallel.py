"""workers=: the same answer for any number of workers, from any number of calling threads."""

import threading

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from answers import in_threads

rng = np.random.default_rng(0)
WORDS = ["spam", "ham", "Émile", "naïve", "🙂", "straße", "data", "x1", "ok", "ΣΟΦΙΑ"]
DOCUMENTS = [" ".join(rng.choice(WORDS, size=rng.integers(0, 300))) for _ in range(1500)]
LABELS = rng.integers(0, 2, size=len(DOCUMENTS))
lowered = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True).fit(DOCUMENTS)
cased = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), lowercase=False).fit(DOCUMENTS)
model = LogisticRegression(max_iter=300).fit(
    sp.hstack([lowered.transform(DOCUMENTS), cased.transform(DOCUMENTS)], format="csr"), LABELS
)


def predict(df):
    first = lowered.transform(df["text"])  # read two statements later: may run on a worker
    second = cased.transform(df["text"])
    return model.predict_proba(sp.hstack([first, second], format="csr"))[:, 1]


FRAME = pd.DataFrame({"text": DOCUMENTS})


def run_with_timeout(function, seconds=120):
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("value", function()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call did not finish (a deadlock between workers?)"
    return outcome["value"]


def test_the_answer_does_not_depend_on_the_number_of_workers():
    expected_batch = predict(FRAME)
    rows = [FRAME.iloc[[i]] for i in range(0, 1500, 97)]
    for workers in (1, 2, 3):
        f = willump.optimize(workers=workers)(predict)
        for _ in range(3):  # later calls know the measured cost and may hand work to a worker
            np.testing.assert_array_equal(run_with_timeout(lambda: f(FRAME)), expected_batch)
            for row in rows:  # long rows: vectorizers measured slow enough run side by side
                np.testing.assert_array_equal(run_with_timeout(lambda: f(row)), predict(row))
        table = f.explain_compilation()
        assert (table.loc[table["calls"] > 0, "status"] == "compiled").all(), table


def test_calls_from_several_threads_at_once():
    f = willump.optimize(workers=2)(predict)
    chunks = [FRAME.iloc[i : i + 150] for i in range(0, 1500, 150)]
    expected = [predict(chunk) for chunk in chunks]
    results = [None] * len(chunks)
    errors = []

    def work(i):
        try:
            for _ in range(3):
                results[i] = f(chunks[i])
        except Exception as error:  # reported below, with the thread's chunk
            errors.append((i, error))

    threads = in_threads(work, range(len(chunks)), timeout=120)
    assert not errors and not any(t.is_alive() for t in threads), errors
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


def test_a_task_of_map_may_map_again():
    """A vectorizer run by a worker splits its own rows with map: that must not wait for itself."""
    from willump.compile.parallel import Workers

    workers = Workers(2)
    nested = run_with_timeout(lambda: workers.map(lambda i: workers.map(lambda j: 10 * i + j, [0, 1]), [1, 2, 3]), 30)
    assert nested == [[10, 11], [20, 21], [30, 31]]


def test_map_hands_the_items_to_whichever_thread_is_free():
    """A worker held up on its first item (a core busy with other work) leaves the others to the
    calling thread: here that item waits until every other one is done, which only the caller can do
    (with the items after the first handed to the workers in advance, the call never finishes)."""
    from willump.compile.parallel import Workers

    workers, items = Workers(2), list(range(12))
    caller, held, lock, done = [], [], threading.Lock(), []
    worker_started, others_done = threading.Event(), threading.Event()

    def work(i):
        with lock:
            hold = threading.get_ident() != caller[0] and not held
            if hold:
                held.append(i)
        if hold:
            worker_started.set()
            assert others_done.wait(30), "the other items were left to the worker held up"
        else:
            assert worker_started.wait(30), "no worker took an item"
        with lock:
            done.append(i)
            if len(done) == len(items) - 1 and held and held[0] not in done:
                others_done.set()
        return i * i

    def call():
        caller.append(threading.get_ident())
        return workers.map(work, items)

    assert run_with_timeout(call, 60) == [i * i for i in items]
    assert sorted(done) == items and len(held) == 1


def test_split_makes_parts_a_worker_of_at_least_the_minimum():
    from willump.compile.parallel import Workers

    parts = Workers(2).split(10_000, 500, per_worker=4)
    assert len(parts) == 8 and parts[0].start == 0 and parts[-1].stop == 10_000
    assert all(a.stop == b.start for a, b in zip(parts, parts[1:])) and min(map(len, parts)) >= 500
    assert len(Workers(2).split(1_200, 500, per_worker=4)) == 2


def test_work_handed_to_workers_that_became_cheap_runs_here_again():
    """A branch whose first calls were slow (a kernel's compilation) is handed to a worker; its time
    there keeps counting, so once it is cheap it runs on the calling thread, without a thread's wait."""
    from sklearn.preprocessing import StandardScaler

    from willump.compile.parallel import WORTH_A_THREAD, Workers
    from willump.compile.sites import CallSite, Pending, begin_call, end_call

    scaler = StandardScaler().fit(np.arange(20.0).reshape(10, 2))
    site = CallSite("branch", workers=Workers(2))
    site.defers = site.overlaps = True
    site.cost = 0.05  # (as after a first call that compiled the kernel)
    handed = []
    while len(handed) < 1000 and (not handed or handed[-1]):  # (a loaded machine slows the calls: no count of them is promised)
        outer = begin_call()
        try:
            result = site(scaler.transform, np.ones((1, 2)))
            handed.append(type(result) is Pending)
            value = result.result() if type(result) is Pending else result
        finally:
            end_call(outer)
        np.testing.assert_array_equal(value, scaler.transform(np.ones((1, 2))))
        assert site.cost < 0.05, "the time a worker took did not count"
    assert handed[0] and not handed[-1] and site.cost < WORTH_A_THREAD, (len(handed), site.cost)
